#include "serve/server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>

#include "common/file.h"

namespace golinear::serve {

namespace {

using std::chrono::milliseconds;

// How often a waiting handler looks for a client that went away.
constexpr milliseconds kPollInterval{50};

void send_json(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, const ApiError& error) {
  send_json(res, error.status, api_error_json(error));
}

ApiError unavailable(const std::string& message) {
  return ApiError{503, message, "unavailable_error", "", ""};
}

// An error of `status` with the type OpenAI gives it.
ApiError error_of(int status, std::string message, std::string param = "") {
  const char* type = status == 503   ? "unavailable_error"
                     : status >= 500 ? "server_error"
                                     : "invalid_request_error";
  return ApiError{status, std::move(message), type, "", std::move(param)};
}

// Calls `visit(fd)` for each descriptor of this process until it returns true (cpp-httplib 0.11
// hands neither the listening nor a connection's socket to its users); whether one did.
template <class Visit>
bool any_descriptor(Visit visit) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return false;
  bool found = false;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || end == entry->d_name) continue;
    if ((found = visit((int)fd))) break;
  }
  closedir(dir);
  return found;
}

// The port of a socket address (IPv4 or IPv6), or -1.
int port_of(const sockaddr_storage& a) {
  return a.ss_family == AF_INET    ? ntohs(((const sockaddr_in&)a).sin_port)
         : a.ss_family == AF_INET6 ? ntohs(((const sockaddr_in6&)a).sin6_port)
                                   : -1;
}

// The socket of the connection `req` came on, found by its two addresses among the process's
// descriptors; -1 when not found. The descriptor stays this connection's until the handler and
// its content provider return.
int connection_socket(const httplib::Request& req) {
  int found = -1;
  any_descriptor([&](int fd) {
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
    if (getsockname(fd, (sockaddr*)&local, &local_len) != 0) return false;
    if (getpeername(fd, (sockaddr*)&peer, &peer_len) != 0) return false;
    // The peer's address as cpp-httplib writes req.remote_addr (getnameinfo, numeric host).
    char host[NI_MAXHOST];
    const bool same_peer =
        getnameinfo((const sockaddr*)&peer, peer_len, host, sizeof host, nullptr, 0,
                    NI_NUMERICHOST) == 0 &&
        req.remote_addr == host;
    if (port_of(local) != req.local_port || port_of(peer) != req.remote_port || !same_peer)
      return false;
    found = fd;
    return true;
  });
  return found;
}

// True when the client closed its side of the connection (or it broke).
bool peer_closed(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  char c;
  return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

std::string new_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t base = std::random_device{}() * 0x9e3779b97f4a7c15ull;
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%s%016llx", prefix,
                (unsigned long long)(base ^ (counter.fetch_add(1) * 0xbf58476d1ce4e5b9ull)));
  return buf;
}

Json usage_json(const Job& job) {
  return {{"prompt_tokens", job.prompt_tokens},
          {"completion_tokens", job.completion_tokens},
          {"total_tokens", job.prompt_tokens + job.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", job.cached_tokens}}}};
}

// A token as text (may hold U+FFFD for part of a character) and as its UTF-8 bytes.
Json token_entry(const Tokenizer& tokenizer, int32_t id, float logprob) {
  std::string bytes = tokenizer.decode_bytes({id});
  Json list = Json::array();
  for (unsigned char c : bytes) list.push_back((int)c);
  return {{"token", tokenizer.token_text(id)}, {"logprob", logprob}, {"bytes", list}};
}

// The logprobs object of a choice for the tokens of some deltas (chat or completions shape).
Json logprobs_json(const Tokenizer& tokenizer, bool chat, const std::vector<Delta>& deltas,
                   size_t* text_offset) {
  if (chat) {
    Json content = Json::array();
    for (const Delta& d : deltas)
      for (const TokenLogprob& t : d.tokens) {
        Json entry = token_entry(tokenizer, t.id, t.logprob);
        Json top = Json::array();
        for (auto [id, lp] : t.top) top.push_back(token_entry(tokenizer, id, lp));
        entry["top_logprobs"] = top;
        content.push_back(entry);
      }
    return {{"content", content}};
  }
  Json tokens = Json::array(), token_logprobs = Json::array(), top_logprobs = Json::array(),
       offsets = Json::array();
  for (const Delta& d : deltas)
    for (const TokenLogprob& t : d.tokens) {
      const std::string text = tokenizer.token_text(t.id);
      tokens.push_back(text);
      token_logprobs.push_back(t.logprob);
      Json top = Json::object();
      for (auto [id, lp] : t.top) top[tokenizer.token_text(id)] = lp;
      top_logprobs.push_back(top);
      offsets.push_back(*text_offset);
      *text_offset += tokenizer.decode({t.id}, true).size();
    }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", top_logprobs},
          {"text_offset", offsets}};
}

// One choice of a response or of a stream chunk.
Json choice_json(bool chat, bool chunk, const std::string& text, const Json& logprobs,
                 const Json& finish_reason, bool first_chunk) {
  Json choice = {{"index", 0}};
  if (!chat) {
    choice["text"] = text;
  } else if (chunk) {
    Json delta = Json::object();
    if (first_chunk) delta["role"] = "assistant";
    if (!text.empty() || first_chunk) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  }
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish_reason;
  return choice;
}

std::string sse(const Json& event) {
  return "data: " + event.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
}

std::string endpoint_label(const std::string& path) {
  static const char* known[] = {
      "/health",   "/v1/models",  "/v1/completions", "/v1/chat/completions",
      "/tokenize", "/detokenize", "/metrics",        "/slots"};
  for (const char* k : known)
    if (path == k) return k;
  if (path.rfind("/slots/", 0) == 0) return "/slots/{id}";
  return "other";
}

}  // namespace

// cpp-httplib's server with a way to stop accepting that lets open responses finish: its own
// stop() also ends the streams in flight (their providers see the server shutting down).
// Shutting the listening socket down makes accept() fail, the accept loop closes the socket and
// returns once the worker threads are done with their connections.
class HttpServer : public httplib::Server {
 public:
  void stop_accepting() {
    const auto sock = svr_sock_.load();
    if (sock != INVALID_SOCKET) ::shutdown(sock, SHUT_RDWR);
  }
};

namespace {

// State of one streamed response, shared by the content provider and its releaser.
struct Stream {
  std::shared_ptr<Job> job;
  const Engine* engine = nullptr;
  bool chat = false, logprobs = false, include_usage = false;
  std::string id, model;
  long created = 0;
  int fd = -1;
  bool first = true;
  size_t text_offset = 0;
};

}  // namespace

Server::Server(ServerOptions options) : options_(std::move(options)) {
  http_ = std::make_unique<HttpServer>();
  const int threads = options_.threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(options_.timeout_s);
  http_->set_write_timeout(options_.timeout_s);
  routes();
}

Server::~Server() = default;

Result<int> Server::bind() {
  const int port = options_.port == 0 ? http_->bind_to_any_port(options_.host)
                   : http_->bind_to_port(options_.host, options_.port) ? options_.port
                                                                       : -1;
  if (port <= 0)
    return make_error("cannot listen on ", options_.host, ":", options_.port,
                      " (address in use, or not an address of this machine)");
  widen_listen_backlog(port);  // at worst the library's 5
  return port;
}

void Server::set_ready(const Engine& engine) { engine_ = &engine; }

Status Server::serve() {
  if (!http_->listen_after_bind() && !stopping_)
    return make_error("the HTTP server stopped unexpectedly");
  return ok_status();
}

void Server::stop() {
  stopping_ = true;
  http_->stop_accepting();
}

void Server::routes() {
  httplib::Server& http = *http_;
  using httplib::Request;
  using httplib::Response;
  using HandlerResponse = httplib::Server::HandlerResponse;

  // Keys first (every path but /health), then "still loading".
  http.set_pre_routing_handler([this](const Request& req, Response& res) {
    if (req.path == "/health") return HandlerResponse::Unhandled;
    if (!options_.api_keys.empty()) {
      const std::string auth = req.get_header_value("Authorization");
      bool ok = false;
      for (const auto& key : options_.api_keys) ok = ok || auth == "Bearer " + key;
      if (!ok) {
        send_error(res, ApiError{401, "Invalid API key: pass it as 'Authorization: Bearer KEY'",
                                 "authentication_error", "invalid_api_key", ""});
        return HandlerResponse::Handled;
      }
    }
    if (!engine_.load()) {
      send_error(res, unavailable("Loading model"));
      return HandlerResponse::Handled;
    }
    if (stopping_) {  // a request on a connection kept alive from before the stop
      send_error(res, unavailable("the server is shutting down"));
      return HandlerResponse::Handled;
    }
    return HandlerResponse::Unhandled;
  });

  // Statuses cpp-httplib sets itself (404 no route, 413 body too large, 400 bad request line)
  // get an OpenAI-shaped body too.
  http.set_error_handler([this](const Request& req, Response& res) {
    if (!res.body.empty()) return;
    std::string message = "request failed";
    std::string type = "invalid_request_error";
    if (res.status == 404) message = "no endpoint " + req.method + " " + req.path;
    if (res.status == 405) message = "method " + req.method + " not allowed on " + req.path;
    if (res.status == 413)
      message =
          str_cat("the request body exceeds the limit of ", options_.max_body_bytes, " bytes");
    if (res.status >= 500) type = "server_error";
    send_json(res, res.status, api_error_json(ApiError{res.status, message, type, "", ""}));
  });
  http.set_exception_handler([](const Request&, Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = std::string("internal error: ") + e.what();
    } catch (...) {
    }
    send_error(res, ApiError{500, what, "server_error", "", ""});
  });
  http.set_logger([this](const Request& req, const Response& res) {
    metrics_.count_http(endpoint_label(req.path), res.status);
  });

  http.Get("/health", [this](const Request&, Response& res) {
    if (!engine_.load()) return send_error(res, unavailable("Loading model"));
    if (stopping_) return send_error(res, unavailable("the server is shutting down"));
    send_json(res, 200, {{"status", "ok"}});
  });

  http.Get("/v1/models", [this](const Request&, Response& res) {
    const Engine& e = *engine_.load();
    send_json(res, 200,
              {{"object", "list"},
               {"data", Json::array({{{"id", e.model.name},
                                      {"object", "model"},
                                      {"created", (long)std::time(nullptr)},
                                      {"owned_by", "golinear"},
                                      {"max_model_len", e.model.max_context}}})}});
  });

  auto completions = [this](bool chat) {
    return [this, chat](const Request& req, Response& res) {
      const Engine& engine = *engine_.load();
      CompletionRequest request;
      if (auto error = completion_request_parse(req.body, chat, engine.model, &request))
        return send_error(res, *error);
      auto job = std::make_shared<Job>(std::move(request.params));
      switch (engine.scheduler->submit(job)) {
        case Scheduler::Submitted::accepted:
          break;
        case Scheduler::Submitted::queue_full:
          return send_error(res, unavailable("the server is busy: every slot is taken and the "
                                             "wait queue is full (--max-queue); retry later"));
        case Scheduler::Submitted::stopping:
          return send_error(res, unavailable("the server is shutting down"));
      }
      auto stream = std::make_shared<Stream>();
      stream->job = job;
      stream->engine = &engine;
      stream->chat = chat;
      stream->logprobs = request.logprobs;
      stream->include_usage = request.include_usage;
      stream->id = new_id(chat ? "chatcmpl-" : "cmpl-");
      stream->model = engine.model.name;
      stream->created = (long)std::time(nullptr);
      stream->fd = connection_socket(req);
      const Tokenizer& tokenizer = *engine.model.tokenizer;
      const char* object =
          chat ? (request.stream ? "chat.completion.chunk" : "chat.completion") : "text_completion";

      if (!request.stream) {
        std::vector<Delta> deltas;
        while (!job->wait(kPollInterval, &deltas))
          if (peer_closed(stream->fd)) job->cancel();
        if (job->finish_reason == FinishReason::cancelled) return send_json(res, 499, {});
        if (job->finish_reason == FinishReason::error)
          return send_error(
              res, ApiError{500, "generation failed: " + job->error, "server_error", "", ""});
        std::string text;
        for (const Delta& d : deltas) text += d.text;
        Json logprobs = request.logprobs
                            ? logprobs_json(tokenizer, chat, deltas, &stream->text_offset)
                            : Json();
        return send_json(
            res, 200,
            {{"id", stream->id},
             {"object", object},
             {"created", stream->created},
             {"model", stream->model},
             {"choices", Json::array({choice_json(chat, false, text, logprobs,
                                                  to_string(job->finish_reason), false)})},
             {"usage", usage_json(*job)}});
      }

      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [stream, object](size_t, httplib::DataSink& sink) {
            Job& job = *stream->job;
            const Tokenizer& tokenizer = *stream->engine->model.tokenizer;
            std::vector<Delta> deltas;
            const bool finished = job.wait(kPollInterval, &deltas);
            auto chunk = [&](const Json& choices) {
              return Json{{"id", stream->id},
                          {"object", object},
                          {"created", stream->created},
                          {"model", stream->model},
                          {"choices", choices}};
            };
            std::string out;
            for (const Delta& d : deltas) {
              Json logprobs = stream->logprobs ? logprobs_json(tokenizer, stream->chat, {d},
                                                               &stream->text_offset)
                                               : Json();
              out += sse(chunk(Json::array(
                  {choice_json(stream->chat, true, d.text, logprobs, nullptr, stream->first)})));
              stream->first = false;
            }
            if (finished) {
              if (job.finish_reason == FinishReason::error) {
                out += sse(api_error_json(
                    ApiError{500, "generation failed: " + job.error, "server_error", "", ""}));
              } else if (job.finish_reason != FinishReason::cancelled) {
                out += sse(
                    chunk(Json::array({choice_json(stream->chat, true, "", nullptr,
                                                   to_string(job.finish_reason), stream->first)})));
                if (stream->include_usage) {
                  Json last = chunk(Json::array());
                  last["usage"] = usage_json(job);
                  out += sse(last);
                }
              }
              out += "data: [DONE]\n\n";
            }
            if (!out.empty() && !sink.write(out.data(), out.size())) {
              job.cancel();
              return false;
            }
            if (finished) {
              sink.done();
              return true;
            }
            if (peer_closed(stream->fd)) {
              job.cancel();
              return false;
            }
            return true;
          },
          [stream](bool) { stream->job->cancel(); });
    };
  };
  http.Post("/v1/completions", completions(false));
  http.Post("/v1/chat/completions", completions(true));

  http.Post("/tokenize", [this](const Request& req, Response& res) {
    const Engine& e = *engine_.load();
    std::vector<int32_t> ids;
    if (auto error = tokenize_request_parse(req.body, e.model, &ids))
      return send_error(res, *error);
    send_json(res, 200,
              {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", e.model.max_context}});
  });
  http.Post("/detokenize", [this](const Request& req, Response& res) {
    const Engine& e = *engine_.load();
    std::vector<int32_t> ids;
    if (auto error = detokenize_request_parse(req.body, e.model, &ids))
      return send_error(res, *error);
    const std::string text = e.model.tokenizer->decode(ids);
    send_json(res, 200, {{"content", text}, {"prompt", text}});
  });

  http.Get("/metrics", [this](const Request&, Response& res) {
    const Engine& e = *engine_.load();
    MetricsGauges g;
    g.requests_running = e.scheduler->running();
    g.requests_waiting = e.scheduler->waiting();
    const auto slots = e.scheduler->slots();
    g.slots = (long)slots.size();
    for (const auto& s : slots) g.state_bytes += s.state_bytes;
    if (e.cache) {
      const PromptCacheStats c = e.cache->stats();
      g.cache_entries = c.entries;
      g.cache_bytes = c.bytes;
      g.cache_capacity_bytes = c.capacity_bytes;
      g.cache_hits = c.hits;
      g.cache_misses = c.misses;
      g.cache_evictions = c.evictions;
    }
    res.status = 200;
    res.set_content(metrics_.render(g), "text/plain; version=0.0.4; charset=utf-8");
  });

  http.Get("/slots", [this](const Request&, Response& res) {
    const Engine& e = *engine_.load();
    Json list = Json::array();
    for (const SlotInfo& s : e.scheduler->slots())
      list.push_back({{"id", s.id},
                      {"state", s.phase},
                      {"is_processing", s.busy},
                      {"n_ctx", e.model.max_context},
                      {"position", s.position},
                      {"prompt_tokens", s.prompt_tokens},
                      {"cached_tokens", s.cached_tokens},
                      {"generated_tokens", s.generated_tokens},
                      {"state_bytes", s.state_bytes},
                      {"device", e.scheduler->backend().device()}});
    send_json(res, 200, list);
  });

  // Slot actions: save (the slot's record to a file of --slot-save-path), restore (a file into
  // the slot and the prompt cache), erase. Body {"filename": NAME} for save and restore.
  http.Post(R"(/slots/(\d{1,6}))", [this](const Request& req, Response& res) {
    const Engine& e = *engine_.load();
    const int slot = std::stoi(req.matches[1].str());
    const std::string action = req.get_param_value("action");
    if (action == "erase") {
      const SlotActionResult r = e.scheduler->slot_erase(slot);
      if (r.status != 200) return send_error(res, error_of(r.status, r.error));
      return send_json(res, 200, {{"id_slot", slot}, {"n_erased", r.record.tokens.size()}});
    }
    if (action != "save" && action != "restore")
      return send_error(res, error_of(400, "'action' must be save, restore or erase", "action"));
    if (options_.slot_save_path.empty())
      return send_error(res, error_of(400, "slot save and restore need --slot-save-path DIR"));
    std::string filename;
    if (auto error = slot_filename_parse(req.body, &filename)) return send_error(res, *error);
    const std::string path = options_.slot_save_path + "/" + filename;
    if (action == "save") {
      const SlotActionResult r = e.scheduler->slot_save(slot);
      if (r.status != 200) return send_error(res, error_of(r.status, r.error));
      const std::string text = Json{
          {"format", "golinear-slot"},
          {"version", 1},
          {"model", e.model.name},
          {"tokens", r.record.tokens},
          {"calls",
           r.record.calls}}.dump();
      Status written = file_write_atomic(path, text);
      if (!written.ok()) return send_error(res, error_of(500, written.error()));
      return send_json(res, 200,
                       {{"id_slot", slot},
                        {"filename", filename},
                        {"n_saved", r.record.tokens.size()},
                        {"n_written", text.size()}});
    }
    auto text = file_read_text(path);
    if (!text.ok())
      return send_error(
          res, error_of(404, "no slot file " + filename + " in --slot-save-path", "filename"));
    SlotRecord record;
    if (auto error = slot_record_parse(*text, filename, e.model, &record))
      return send_error(res, *error);
    const SlotActionResult r = e.scheduler->slot_restore(slot, record);
    if (r.status != 200) return send_error(res, error_of(r.status, r.error));
    send_json(res, 200,
              {{"id_slot", slot},
               {"filename", filename},
               {"n_restored", record.tokens.size()},
               {"n_read", text->size()}});
  });
}

bool widen_listen_backlog(int port) {
  return any_descriptor([port](int fd) {
    int accepting = 0;
    socklen_t len = sizeof(accepting);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) != 0 || !accepting) return false;
    sockaddr_storage local{};
    socklen_t local_len = sizeof(local);
    if (getsockname(fd, (sockaddr*)&local, &local_len) != 0) return false;
    return port_of(local) == port && ::listen(fd, SOMAXCONN) == 0;
  });
}

}  // namespace golinear::serve
