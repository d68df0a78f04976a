#include <algorithm>
#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/loading.h"
#include "common/progress.h"
#include "io/jsonl.h"
#include "runtime/generate.h"
#ifdef GOLINEAR_HAVE_CUDA
#include "runtime/cuda/gpu_sequences.h"
#endif

namespace golinear::cli {

namespace {

// Length of the longest prefix of `text` that ends on a complete UTF-8 character: a byte-level
// token can end inside a character, whose rest arrives with the next token.
size_t complete_utf8_prefix(const std::string& text) {
  size_t n = text.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    unsigned char c = text[n - back];
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead byte
    size_t need = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    return need > back ? n - back : n;
  }
  return n;
}

// --input FILE: every line's prompt generated, --batch at a time over sequence slots
// (runtime::generate_batch); one JSON line per prompt on stdout, in input order.
int generate_batch_of_file(const Args& args, const std::string& device,
                           const runtime::GenerateOptions& options, long batch) {
  auto rows = jsonl_read(args.get("input"));
  if (!rows.ok()) return fail("golinear generate: " + rows.error());
  if (rows->empty()) return fail("golinear generate: " + args.get("input") + " holds no prompt");
  std::vector<std::string> prompts;
  for (size_t i = 0; i < rows->size(); ++i) {
    const Json& row = (*rows)[i];
    if (!row.is_object() || !row.contains("prompt") || !row["prompt"].is_string())
      return fail(str_cat("golinear generate: ", args.get("input"), " line ", i + 1,
                          ": expected {\"prompt\": TEXT}"));
    prompts.push_back(row["prompt"].get<std::string>());
  }
  auto loaded = load_model_and_tokenizer(args.positional()[0], device, "generate");
  if (!loaded.ok()) return fail(loaded.error());
  const Tokenizer& tokenizer = loaded->tokenizer;
  auto limit = context_limit_of(args.positional()[0]);
  if (!limit.ok()) return fail(limit.error());
  // Each prompt its own generator: seed + its index.
  std::vector<runtime::BatchRequest> requests;
  long longest = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    runtime::BatchRequest request{tokenizer.encode(prompts[i], true), options.max_new_tokens,
                                  options.sampler};
    request.sampler.seed = options.sampler.seed + i;
    const long total = (long)request.prompt.size() + options.max_new_tokens;
    if (total > limit->tokens)
      return fail(str_cat("golinear generate: prompt ", i, ": ", request.prompt.size(), " + ",
                          options.max_new_tokens, " tokens exceed the limit of ", limit->tokens,
                          " (", limit->reason, ")"));
    longest = std::max(longest, total);
    requests.push_back(std::move(request));
  }
  const int count = (int)std::min<long>(batch, (long)requests.size());
  auto slots = sequence_slots_of(*loaded, device, count, longest, "generate");
  if (!slots.ok()) return fail(slots.error());
  memory_checkpoint(*loaded);  // the slots' caches are allocated
  ProgressBar bar("generate", (long)requests.size(), "tok");
  long done = 0, tokens = 0;
  auto generated = runtime::generate_batch(
      **slots, requests, loaded->model->config.eos_token_ids,
      [&](size_t, const std::vector<int32_t>& out) {
        tokens += (long)out.size();
        bar.update(++done, (double)tokens);
      });
  if (!generated.ok()) return fail("golinear generate: " + generated.error());
  bar.finish();
  const auto& stops = loaded->model->config.eos_token_ids;
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::vector<int32_t>& out = (*generated)[i];
    const bool stopped =
        !out.empty() && std::find(stops.begin(), stops.end(), out.back()) != stops.end();
    Json line = {{"index", i},
                 {"prompt", prompts[i]},
                 {"text", tokenizer.decode(out, /*skip_special=*/true)},
                 {"prompt_tokens", requests[i].prompt.size()},
                 {"completion_tokens", out.size()},
                 {"finish_reason", stopped ? "stop" : "length"}};
    std::printf("%s\n", line.dump().c_str());
  }
  memory_report(*loaded, "generate");
  return 0;
}

}  // namespace

int cmd_generate(const Argv& argv) {
  auto args = Args::parse("generate", argv,
                          {{"prompt", true}, {"input", true}, {"batch", true},
                           {"max-new-tokens", true}, {"temperature", true}, {"top-p", true},
                           {"seed", true}, {"device", true}},
                          1, 1);
  if (!args.ok()) return fail(args.error());
  if (args->has("prompt") == args->has("input"))
    return fail("golinear generate: give --prompt TEXT or --input FILE (one {\"prompt\": TEXT} per line)");
  if (args->has("batch") && !args->has("input"))
    return fail("golinear generate: --batch is for --input FILE");
  auto device = device_option(*args, "generate");
  if (!device.ok()) return fail(device.error());
  runtime::GenerateOptions options;
  auto max_new = args->get_int("max-new-tokens", 64, 0, 1 << 24);
  auto temperature = args->get_double("temperature", 0.0, 0.0, 100.0);
  auto top_p = args->get_double("top-p", 1.0, 1e-6, 1.0);
  auto seed = args->get_int("seed", 0, 0, (1L << 62));
  if (!max_new.ok()) return fail(max_new.error());
  if (!temperature.ok()) return fail(temperature.error());
  if (!top_p.ok()) return fail(top_p.error());
  if (!seed.ok()) return fail(seed.error());
  options.max_new_tokens = (int)*max_new;
  options.sampler = {(float)*temperature, (float)*top_p, (uint64_t)*seed};
  if (args->has("input")) {
    auto batch = args->get_int("batch", 16, 1, 1 << 16);
    if (!batch.ok()) return fail(batch.error());
    return generate_batch_of_file(*args, *device, options, *batch);
  }

  auto loaded = load_model_and_tokenizer(args->positional()[0], *device, "generate");
  if (!loaded.ok()) return fail(loaded.error());
  const Model& model = *loaded->model;
  const Tokenizer& tokenizer = loaded->tokenizer;
  options.stop_ids = model.config.eos_token_ids;
  std::vector<int32_t> prompt = tokenizer.encode(args->get("prompt"), true);
  auto limit = context_limit_of(args->positional()[0]);
  if (!limit.ok()) return fail(limit.error());
  if ((long)prompt.size() + options.max_new_tokens > limit->tokens)
    std::fprintf(stderr, "golinear generate: warning: %zu + %d tokens exceed the limit of %ld (%s)\n",
                 prompt.size(), options.max_new_tokens, limit->tokens, limit->reason.c_str());

  // The sequence: the CPU model's cache, or the GPU model's (bf16 prefill, then the decode step).
  runtime::NewSequence sequences = runtime::cpu_sequences(model);
#ifdef GOLINEAR_HAVE_CUDA
  if (*device == "cuda") sequences = golinear::runtime::cuda::gpu_sequences(*loaded->gpu);
#endif
  std::vector<int32_t> generated;
  size_t printed = 0;
  std::fputs(args->get("prompt").c_str(), stdout);
  auto done = runtime::generate(sequences, model.config.vocab_size, prompt, options, [&](int32_t id) {
    if (generated.empty()) memory_checkpoint(*loaded);  // the sequence's cache is allocated
    generated.push_back(id);
    std::string text = tokenizer.decode(generated, /*skip_special=*/true);
    size_t ready = complete_utf8_prefix(text);
    if (ready > printed) {
      std::fwrite(text.data() + printed, 1, ready - printed, stdout);
      std::fflush(stdout);
      printed = ready;
    }
  });
  if (!done.ok()) return fail("golinear generate: " + done.error());
  std::string text = tokenizer.decode(generated, true);
  if (text.size() > printed) std::fwrite(text.data() + printed, 1, text.size() - printed, stdout);
  std::fputc('\n', stdout);
  memory_report(*loaded, "generate");
  return 0;
}

}  // namespace golinear::cli
