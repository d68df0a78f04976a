// The HTTP side of `golinear serve`: an OpenAI-compatible API on cpp-httplib (Debian's
// libcpp-httplib-dev) in front of the scheduler (serve/scheduler.h). It listens before the model
// is loaded (GET /health answers 503 until set_ready), checks the API key (every path but
// /health), turns bad requests into OpenAI-shaped errors, streams server-sent events, notices a
// client that went away (its request is cancelled and its slot freed) and, on stop(), stops
// accepting while the requests it holds run to their end.
//
// Endpoints: GET /health, GET /v1/models, POST /v1/completions, POST /v1/chat/completions,
// POST /tokenize, POST /detokenize, GET /metrics, GET /slots, POST /slots/{id}?action=save,
// restore or erase. docs/SERVE.md describes them.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "serve/metrics.h"
#include "serve/prompt_cache.h"
#include "serve/request.h"
#include "serve/scheduler.h"

namespace golinear::serve {

class HttpServer;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                    // 0: any free port (bind() says which)
  std::vector<std::string> api_keys;  // empty: no key needed
  size_t max_body_bytes = 8u << 20;   // larger request bodies get 413
  int timeout_s = 600;                // socket read/write timeout
  int threads = 16;                   // HTTP worker threads (each holds one connection)
  std::string slot_save_path;         // directory of the files of POST /slots/{id} save, restore
};

// What is served once the model is loaded.
struct Engine {
  ServedModel model;
  Scheduler* scheduler = nullptr;
  PromptCache* cache = nullptr;  // or null
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();

  // Binds the listening socket; returns the port.
  Result<int> bind();
  // Loading is over: requests are served from now on. `engine` must outlive serve().
  void set_ready(const Engine& engine);
  // Accepts connections until stop(); returns once every request in flight has been answered.
  Status serve();
  // Stops accepting (safe from any thread); serve() then returns when the open requests end.
  void stop();
  Metrics& metrics() { return metrics_; }

 private:
  void routes();
  ServerOptions options_;
  std::unique_ptr<HttpServer> http_;
  Metrics metrics_;
  std::atomic<const Engine*> engine_{nullptr};
  std::atomic<bool> stopping_{false};
};

// cpp-httplib 0.11 (Debian's shared library) listens with a backlog of 5: a burst of clients
// connecting at once (64 streams of a load test) overflows the accept queue, and their SYNs wait
// for a retransmit (about 1 s of first-token latency) or fail. Listening again on this process's
// accepting socket of `port` sets the backlog to SOMAXCONN; returns whether one was found.
// Server::bind calls it.
bool widen_listen_backlog(int port);

}  // namespace golinear::serve
