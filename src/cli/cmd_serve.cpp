#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <thread>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/loading.h"
#include "common/file.h"
#include "model/linearization.h"
#include "runtime/cpu_sequence_slots.h"
#include "serve/server.h"
#ifdef GOLINEAR_HAVE_CUDA
#include "runtime/cuda/sequence_slots.h"
#endif

namespace golinear::cli {

namespace {

int stop_pipe[2] = {-1, -1};

void on_stop_signal(int sig) {
  const char c = (char)sig;
  if (write(stop_pipe[1], &c, 1) != 1) _exit(1);
}

// --api-key-file: one key per line, blank lines and surrounding whitespace ignored.
Result<std::vector<std::string>> read_api_keys(const std::string& path) {
  GL_ASSIGN_OR_RETURN(std::string text, file_read_text(path));
  std::vector<std::string> keys;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t a = line.find_first_not_of(" \t\r"), b = line.find_last_not_of(" \t\r");
    if (a != std::string::npos) keys.push_back(line.substr(a, b - a + 1));
  }
  if (keys.empty()) return make_error(path, ": no API key in the file");
  return keys;
}

}  // namespace

int cmd_serve(const Argv& argv) {
  auto args = Args::parse("serve", argv,
                          {{"host", true},
                           {"port", true},
                           {"device", true},
                           {"parallel", true},
                           {"api-key", true},
                           {"api-key-file", true},
                           {"cache-ram", true},
                           {"slot-save-path", true},
                           {"chat-template-file", true},
                           {"max-queue", true},
                           {"timeout", true},
                           {"prefill-chunk", true},
                           {"snapshot-every", true},
                           {"max-context", true},
                           {"body-limit", true},
                           {"model-name", true},
                           {"threads", true}},
                          1, 1);
  if (!args.ok()) return fail(args.error());
  auto device = device_option(*args, "serve");
  if (!device.ok()) return fail(device.error());
  auto port = args->get_int("port", 8080, 0, 65535);
  auto parallel = args->get_int("parallel", 4, 1, 4096);
  auto max_queue = args->get_int("max-queue", 64, 0, 1 << 20);
  auto timeout = args->get_int("timeout", 600, 1, 1L << 30);
  auto cache_ram = args->get_int("cache-ram", 1024, 0, 1L << 40);
  auto prefill_chunk = args->get_int("prefill-chunk", 512, 1, 1 << 20);
  auto snapshot_every = args->get_int("snapshot-every", 2048, 0, 1 << 30);
  auto body_limit = args->get_int("body-limit", 8L << 20, 1024, 1L << 40);
  auto threads = args->get_int("threads", 0, 0, 4096);
  for (const auto* r : {&port, &parallel, &max_queue, &timeout, &cache_ram, &prefill_chunk,
                        &snapshot_every, &body_limit, &threads})
    if (!r->ok()) return fail(r->error());
  if (args->has("api-key") && args->has("api-key-file"))
    return fail("golinear serve: give --api-key or --api-key-file, not both");

  const std::string dir = args->positional()[0];
  // --max-context: the checkpoint's own limit (model/context_limit.h: max_position_embeddings
  // while any layer is softmax, host memory for a linear model), refused past it in one line.
  auto config = load_model_config(dir);
  if (!config.ok()) return fail("golinear serve: " + config.error());
  auto limit = context_limit_of(dir);
  if (!limit.ok()) return fail("golinear serve: " + limit.error());
  auto max_context = context_option(*args, "serve", "max-context", config->max_position_embeddings, 2, *limit);
  if (!max_context.ok()) return fail(max_context.error());
  serve::ServerOptions server_options;
  server_options.host = args->get("host", "127.0.0.1");
  server_options.port = (int)*port;
  server_options.max_body_bytes = (size_t)*body_limit;
  server_options.timeout_s = (int)*timeout;
  // One worker thread per connection that can be open at once: running, waiting, and a few
  // more to answer health checks and 503s while everything else is taken.
  server_options.threads = (int)(*parallel + *max_queue + 8);
  if (args->has("slot-save-path")) {
    const std::string path = args->get("slot-save-path");
    std::error_code error;
    if (!std::filesystem::is_directory(path, error))
      return fail("golinear serve: --slot-save-path " + path + " is not a directory");
    server_options.slot_save_path = path;
  }
  if (args->has("api-key")) {
    if (args->get("api-key").empty()) return fail("golinear serve: --api-key is empty");
    server_options.api_keys = {args->get("api-key")};
  }
  if (args->has("api-key-file")) {
    auto keys = read_api_keys(args->get("api-key-file"));
    if (!keys.ok()) return fail("golinear serve: --api-key-file " + keys.error());
    server_options.api_keys = *keys;
  }

  // SIGTERM / SIGINT: the handler writes the signal's number into a pipe, a thread reads it and
  // stops the server (a handler may run on any thread, e.g. one of OpenBLAS's, and may do little).
  if (pipe2(stop_pipe, O_CLOEXEC) != 0) return fail("golinear serve: cannot create a pipe");
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that went away must not end the process

  serve::Server server(server_options);
  auto bound = server.bind();
  if (!bound.ok()) return fail("golinear serve: " + bound.error());
  std::fprintf(stderr, "golinear serve: listening on http://%s:%d (loading %s)\n",
               server_options.host.c_str(), *bound, dir.c_str());
  std::atomic<bool> stop_requested{false};
  std::thread signals([&] {
    char sig = 0;
    while (read(stop_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    if (sig == 0) return;  // the end of cmd_serve
    std::fprintf(stderr, "golinear serve: %s: no new requests; finishing the running ones\n",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT");
    stop_requested = true;
    server.stop();
  });
  // Wakes the signal thread at every return from here on.
  struct SignalThreadJoin {
    std::thread& thread;
    ~SignalThreadJoin() {
      const char zero = 0;
      if (write(stop_pipe[1], &zero, 1) != 1) thread.detach();
      if (thread.joinable()) thread.join();
    }
  } join_signals{signals};
  Status served;
  std::thread http([&] { served = server.serve(); });

  auto loaded = load_model_and_tokenizer(dir, *device, "serve");
  if (stop_requested) {  // stopped while loading: nothing to drain
    http.join();
    return 0;
  }
  if (!loaded.ok()) {
    server.stop();
    http.join();
    return fail(loaded.error());
  }
  const Model& model = *loaded->model;
  std::string name =
      args->get("model-name", std::filesystem::path(dir).lexically_normal().filename().string());
  if (name.empty()) name = std::filesystem::path(dir).lexically_normal().parent_path().filename();
  const long context = *max_context;
  // The chat template and its tokens come from the directory holding the tokenizer (an
  // adapter's base).
  auto where = model_directory_resolve(dir);
  if (!where.ok()) {
    server.stop();
    http.join();
    return fail("golinear serve: " + where.error());
  }
  auto served_model =
      serve::served_model_make(where->base, name, context, loaded->tokenizer,
                               model.config.eos_token_ids, args->get("chat-template-file"));
  if (!served_model.ok()) {
    server.stop();
    http.join();
    return fail("golinear serve: " + served_model.error());
  }

  std::unique_ptr<runtime::SequenceSlots> backend;
  if (*device == "cpu")
    backend = std::make_unique<runtime::CpuSequenceSlots>(model, (int)*parallel, (int)*threads);
#ifdef GOLINEAR_HAVE_CUDA
  if (*device == "cuda") {
    auto gpu = runtime::cuda::GpuSequenceSlots::create(*loaded->gpu, (int)*parallel, context);
    if (!gpu.ok()) {
      server.stop();
      http.join();
      return fail("golinear serve --device cuda: " + gpu.error());
    }
    backend = std::move(*gpu);
  }
#endif
  if (!backend) {
    server.stop();
    http.join();
    return fail("golinear serve: --device " + *device + " is not available in this build");
  }
  std::unique_ptr<serve::PromptCache> cache;
  if (*cache_ram > 0 && backend->can_snapshot())
    cache = std::make_unique<serve::PromptCache>((size_t)*cache_ram << 20);
  serve::SchedulerOptions scheduler_options;
  scheduler_options.max_queue = (int)*max_queue;
  scheduler_options.prefill_chunk = (int)*prefill_chunk;
  scheduler_options.snapshot_every = (int)*snapshot_every;
  scheduler_options.cache = cache.get();
  serve::Scheduler scheduler(*backend, loaded->tokenizer, server.metrics(), scheduler_options);
  serve::Engine engine{std::move(*served_model), &scheduler, cache.get()};
  server.set_ready(engine);
  std::fprintf(stderr,
               "golinear serve: ready: model '%s', %ld slots on the %s, context %ld tokens, "
               "prompt cache %ld MiB, chat template %s\n",
               name.c_str(), *parallel, *device == "cpu" ? "CPU" : "GPU", context,
               cache ? *cache_ram : 0L, engine.model.chat_template ? "yes" : "none");

  http.join();  // returns after a stop signal, once the open requests have been answered
  scheduler.drain();
  if (!served.ok()) return fail("golinear serve: " + served.error());
  std::fprintf(stderr, "golinear serve: stopped\n");
  return 0;
}

}  // namespace golinear::cli
