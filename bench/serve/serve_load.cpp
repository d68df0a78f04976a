// golinear_serve_load: a load generator for `golinear serve` (or any OpenAI-compatible server)
// through HTTP, with nothing but cpp-httplib: C threads, each sending R streaming
// POST /v1/completions of M tokens (ignore_eos, so each runs to M), timing each request's time to
// first token and every gap between two streamed chunks that carry text. Prints JSON on stdout:
// the aggregate generated tokens/s, p50/p99 time to first token and inter-token latency,
// the request and error counts and the wall time; its fields are those of the node
// generator it replaced (bench/serve/load.mjs, npm openai), so earlier numbers compare.
//
//   golinear_serve_load URL [--concurrency C=8] [--requests R=2] [--max-tokens M=64]
//                       [--prompt-tokens P] [--temperature T=0.8] [--api-key K] [--timeout S=600]
//                       [--json FILE]
//
// --prompt-tokens P sends each request a prompt of exactly P token ids (a list of ids, as the
// OpenAI API allows), drawn at random per request from the ids of a fixed English text (the
// server's POST /tokenize); without it the prompt is a short sentence. Bad options: one line,
// exit 2; any failed request: reported on stderr and counted in "errors", exit 1.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cli/args.h"
#include "common/file.h"
#include "common/json.h"

namespace golinear {
namespace {

using Clock = std::chrono::steady_clock;
using OrderedJson = nlohmann::ordered_json;  // the report keeps the node generator's field order
constexpr const char* kName = "golinear_serve_load";

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The p-quantile of `values` as the node generator took it: the sorted value at floor(p·n), the
// last at most; NaN (null in the JSON) when there are none.
double percentile(std::vector<double> values, double p) {
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, (size_t)std::floor(p * (double)values.size()))];
}

double round_to(double x, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(x * scale) / scale;
}

struct Options {
  std::string host;    // scheme://host[:port]
  std::string prefix;  // the URL's path, without a trailing '/'
  long concurrency = 8, requests = 2, max_tokens = 64, prompt_tokens = 0, timeout_s = 600;
  double temperature = 0.8;  // 0: greedy (the server's argmax-only decode step)
  std::string api_key, json_file;
};

Result<Options> parse_options(const std::vector<std::string>& argv) {
  auto args = cli::Args::parse("serve_load", argv,
                               {{"concurrency", true},
                                {"requests", true},
                                {"max-tokens", true},
                                {"prompt-tokens", true},
                                {"api-key", true},
                                {"timeout", true},
                                {"temperature", true},
                                {"json", true}},
                               1, 1);
  if (!args.ok()) return Error{args.error()};
  Options o;
  auto c = args->get_int("concurrency", 8, 1, 4096);
  auto r = args->get_int("requests", 2, 1, 1 << 20);
  auto m = args->get_int("max-tokens", 64, 1, 1 << 24);
  auto p = args->get_int("prompt-tokens", 0, 1, 1 << 24);
  auto t = args->get_int("timeout", 600, 1, 1 << 20);
  for (auto* v : {&c, &r, &m, &p, &t})
    if (!v->ok()) return Error{v->error()};
  o.concurrency = *c, o.requests = *r, o.max_tokens = *m, o.prompt_tokens = *p, o.timeout_s = *t;
  const std::string temperature = args->get("temperature", "0.8");
  char* end = nullptr;
  o.temperature = std::strtod(temperature.c_str(), &end);
  if (temperature.empty() || *end != '\0' || !(o.temperature >= 0 && o.temperature <= 2))
    return make_error("golinear serve_load: --temperature must be a number in [0, 2], got '",
                      temperature, "'");
  o.api_key = args->get("api-key");
  if (args->has("api-key") && o.api_key.empty())
    return make_error("golinear serve_load: --api-key is empty");
  o.json_file = args->get("json");
  if (args->has("json") && o.json_file.empty())
    return make_error("golinear serve_load: --json is empty");

  const std::string url = args->positional()[0];
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos ||
      (url.compare(0, scheme, "http") != 0 && url.compare(0, scheme, "https") != 0) ||
      scheme + 3 >= url.size())
    return make_error("golinear serve_load: URL must look like http://HOST:PORT, got '", url, "'");
  const size_t path = url.find('/', scheme + 3);
  o.host = url.substr(0, path);
  o.prefix = path == std::string::npos ? "" : url.substr(path);
  while (!o.prefix.empty() && o.prefix.back() == '/') o.prefix.pop_back();
  return o;
}

// The server's OpenAI route prefix: URL and URL/v1 both work, as the openai client's baseURL.
std::string v1(const Options& o) {
  const bool has_v1 = o.prefix.size() >= 3 && o.prefix.compare(o.prefix.size() - 3, 3, "/v1") == 0;
  return has_v1 ? o.prefix : o.prefix + "/v1";
}

std::unique_ptr<httplib::Client> client_of(const Options& o) {
  auto client = std::make_unique<httplib::Client>(o.host);
  client->set_connection_timeout(10);
  client->set_read_timeout((time_t)o.timeout_s);
  client->set_write_timeout((time_t)o.timeout_s);
  if (!o.api_key.empty()) client->set_bearer_token_auth(o.api_key);
  return client;
}

// GET or POST (body non-empty) of a JSON document; an error names the route and what failed.
Result<Json> call_json(httplib::Client& client, const std::string& path,
                       const std::string& body = "") {
  auto res = body.empty() ? client.Get(path) : client.Post(path, body, "application/json");
  if (!res) return make_error(path, ": ", httplib::to_string(res.error()));
  if (res->status != 200)
    return make_error(path, ": HTTP ", res->status, " ", res->body.substr(0, 300));
  return json_parse(res->body, path);
}

// The `data:` payloads of a server-sent-events stream, as its bytes arrive.
class SseReader {
 public:
  template <class OnEvent>
  void feed(const char* data, size_t n, OnEvent&& on_event) {
    buffer_.append(data, n);
    for (size_t end; (end = buffer_.find("\n\n")) != std::string::npos;) {
      std::string event = buffer_.substr(0, end), payload;
      buffer_.erase(0, end + 2);
      size_t begin = 0;
      while (begin <= event.size()) {
        size_t stop = std::min(event.find('\n', begin), event.size());
        std::string line = event.substr(begin, stop - begin);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.rfind("data:", 0) == 0) {
          if (!payload.empty()) payload += '\n';
          payload += line.substr(line.size() > 5 && line[5] == ' ' ? 6 : 5);
        }
        begin = stop + 1;
      }
      if (!payload.empty()) on_event(payload);
    }
  }

 private:
  std::string buffer_;
};

struct Outcome {
  std::string error;  // empty: the request succeeded
  double ttft_ms = 0;
  std::vector<double> itl_ms;
  long tokens = 0;  // usage.completion_tokens
};

// One streaming completion; the times are taken as each chunk arrives.
Outcome stream_completion(httplib::Client& client, const std::string& path, const Json& body) {
  Outcome out;
  int status = 0;
  std::string error_body;
  bool done = false, usage = false, first = true;
  SseReader sse;
  const auto start = Clock::now();
  auto last = start;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (status != 200) {
      error_body.append(data, std::min(n, (size_t)300));
      return true;
    }
    const auto now = Clock::now();
    sse.feed(data, n, [&](const std::string& payload) {
      if (!out.error.empty() || done) return;
      if (payload == "[DONE]") {
        done = true;
        return;
      }
      auto event = json_parse(payload, "a streamed chunk");
      if (!event.ok()) {
        out.error = event.error();
        return;
      }
      if (auto e = event->find("error"); e != event->end()) {
        out.error = "the stream ended in an error: " + e->dump();
        return;
      }
      if (auto u = event->find("usage"); u != event->end() && u->is_object()) {
        auto tokens = json_get<long>(*u, "completion_tokens", "usage");
        if (!tokens.ok()) {
          out.error = tokens.error();
          return;
        }
        out.tokens = *tokens;
        usage = true;
      }
      auto choices = event->find("choices");
      if (choices == event->end() || !choices->is_array() || choices->empty()) return;
      auto text = (*choices)[0].find("text");
      if (text == (*choices)[0].end() || !text->is_string() || text->get<std::string>().empty())
        return;
      if (first)
        out.ttft_ms = ms_between(start, now);
      else
        out.itl_ms.push_back(ms_between(last, now));
      first = false;
      last = now;
    });
    return out.error.empty();
  };
  auto res = client.send(req);
  if (!out.error.empty()) return out;
  if (!res) {
    out.error = httplib::to_string(res.error());
  } else if (status != 200) {
    out.error = str_cat("HTTP ", status, " ", error_body);
  } else if (!done) {
    out.error = "the stream ended without data: [DONE]";
  } else if (!usage) {
    out.error = "the stream carried no usage (stream_options.include_usage)";
  } else if (first) {
    out.error = "the stream carried no text";
  }
  return out;
}

int run(const Options& o) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "%s: %s\n", kName, message.c_str());
    return 1;
  };
  auto setup = client_of(o);
  auto models = call_json(*setup, v1(o) + "/models");
  if (!models.ok()) return fail(models.error());
  if (!(*models)["data"].is_array() || (*models)["data"].empty())
    return fail(v1(o) + "/models lists no model");
  auto model = json_get<std::string>((*models)["data"][0], "id", v1(o) + "/models");
  if (!model.ok()) return fail(model.error());
  auto max_len = json_get_or<long>((*models)["data"][0], "max_model_len", 0, v1(o) + "/models");
  if (max_len.ok() && *max_len > 0 && std::max(o.prompt_tokens, 1L) + o.max_tokens > *max_len) {
    const std::string asked =
        o.prompt_tokens > 0 ? str_cat("--prompt-tokens ", o.prompt_tokens, " + ") : "";
    std::fprintf(stderr, "%s: %s--max-tokens %ld: more than the model's context of %ld tokens\n",
                 kName, asked.c_str(), o.max_tokens, *max_len);
    return 2;
  }

  // --prompt-tokens: the distinct ids of a fixed text are the pool each prompt draws from.
  std::vector<int32_t> pool;
  if (o.prompt_tokens > 0) {
    const Json request = {
        {"content",
         "The quick brown fox jumps over the lazy dog while seven wizards quietly "
         "judge the boxing match; meanwhile a river of numbers, letters, colours "
         "and names flows through the old town, past the market, the library, "
         "the harbour and the hills where the shepherds count their sheep."},
        {"add_special", false}};
    auto tokens = call_json(*setup, o.prefix + "/tokenize", request.dump());
    if (!tokens.ok()) return fail(tokens.error());
    auto ids = json_get<std::vector<int32_t>>(*tokens, "tokens", o.prefix + "/tokenize");
    if (!ids.ok()) return fail(ids.error());
    std::set<int32_t> distinct(ids->begin(), ids->end());
    pool.assign(distinct.begin(), distinct.end());
    if (pool.empty()) return fail(o.prefix + "/tokenize gave no ids");
  }

  std::mutex mutex;
  std::vector<double> ttft, itl;
  long tokens = 0, errors = 0;
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (long c = 0; c < o.concurrency; ++c) {
    threads.emplace_back([&, c] {
      auto client = client_of(o);
      for (long r = 0; r < o.requests; ++r) {
        const long seed = c * 1000 + r;
        Json body = {{"model", *model},    {"max_tokens", o.max_tokens},
                     {"temperature", o.temperature}, {"seed", seed},
                     {"stream", true},     {"stream_options", {{"include_usage", true}}},
                     {"ignore_eos", true}};
        if (o.prompt_tokens > 0) {
          std::mt19937_64 rng((uint64_t)seed);
          std::uniform_int_distribution<size_t> pick(0, pool.size() - 1);
          std::vector<int32_t> prompt((size_t)o.prompt_tokens);
          for (auto& id : prompt) id = pool[pick(rng)];
          body["prompt"] = prompt;
        } else {
          body["prompt"] = str_cat("Request ", c, ".", r, ": once upon a time");
        }
        Outcome result = stream_completion(*client, v1(o) + "/completions", body);
        std::lock_guard<std::mutex> lock(mutex);
        if (!result.error.empty()) {
          ++errors;
          std::fprintf(stderr, "%s: request %ld.%ld failed: %s\n", kName, c, r,
                       result.error.c_str());
          continue;
        }
        tokens += result.tokens;
        ttft.push_back(result.ttft_ms);
        itl.insert(itl.end(), result.itl_ms.begin(), result.itl_ms.end());
      }
    });
  }
  for (auto& t : threads) t.join();
  const double seconds = ms_between(t0, Clock::now()) / 1000;

  auto quantiles = [](const std::vector<double>& v) {
    return OrderedJson{{"p50", round_to(percentile(v, 0.5), 1)},
                       {"p99", round_to(percentile(v, 0.99), 1)}};
  };
  // the node generator's fields, in its order, then the errors and the prompt length.
  const OrderedJson report = {
      {"concurrency", o.concurrency},
      {"requests", o.concurrency * o.requests},
      {"max_tokens", o.max_tokens},
      {"seconds", round_to(seconds, 2)},
      {"generated_tokens", tokens},
      {"tokens_per_s", round_to((double)tokens / seconds, 1)},
      {"ttft_ms", quantiles(ttft)},
      {"itl_ms", quantiles(itl)},
      {"errors", errors},
      {"prompt_tokens", o.prompt_tokens > 0 ? OrderedJson(o.prompt_tokens) : OrderedJson()}};
  const std::string text = report.dump() + "\n";
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  if (!o.json_file.empty())
    if (auto written = file_write_atomic(o.json_file, text); !written.ok())
      return fail("--json " + written.error());
  if (errors > 0)
    return fail(str_cat(errors, " of ", o.concurrency * o.requests, " requests failed"));
  return 0;
}

}  // namespace
}  // namespace golinear

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::puts(
        "usage: golinear_serve_load URL [--concurrency C=8] [--requests R=2] [--max-tokens M=64]\n"
        "                           [--prompt-tokens P] [--temperature T=0.8] [--api-key K]\n"
        "                           [--timeout S=600] [--json FILE]\n"
        "C threads each send R streaming POST URL/v1/completions of M tokens (ignore_eos); prints\n"
        "JSON: tokens/s, p50/p99 time to first token and inter-token latency (ms), errors.\n"
        "--prompt-tokens P: prompts of exactly P token ids (random ids of the server's "
        "/tokenize).");
    return 0;
  }
  auto options = golinear::parse_options(args);
  if (!options.ok()) {
    // The shared option parser names the command "golinear serve_load"; this is its own binary.
    std::string message = options.error();
    for (size_t at; (at = message.find("golinear serve_load")) != std::string::npos;)
      message.replace(at, 19, golinear::kName);
    std::fprintf(stderr, "%s\n", message.c_str());
    return 2;
  }
  return golinear::run(*options);
}
