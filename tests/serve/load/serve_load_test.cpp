// golinear_serve_load (bench/serve/serve_load.cpp) against the real `golinear serve` of the bundled
// model on a loopback port, as a user runs them: its JSON report, its errors and its bad options.
// Needs no node; every wait is bounded.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/file.h"
#include "common/json.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kModel = std::string(GOLINEAR_MODEL_DIR) + "/tiny-llama3-25m";

// `golinear serve` of the bundled model on the CPU with `extra` options; stopped (SIGTERM, then
// SIGKILL after 20 s) when destroyed.
class Server {
 public:
  explicit Server(const std::vector<std::string>& extra) {
    log_ = (fs::temp_directory_path() / ("golinear_serve_load_" + std::to_string(::getpid()) + "_" +
                                         std::to_string(count_++) + ".log"))
               .string();
    std::vector<std::string> args = {GOLINEAR_CLI, "serve", kModel,     "--port", "0",
                                     "--threads",  "1",     "--device", "cpu"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      FILE* f = std::freopen(log_.c_str(), "w", stderr);
      if (!f) ::_exit(127);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~Server() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    const auto end = Clock::now() + std::chrono::seconds(20);
    while (::waitpid(pid_, nullptr, WNOHANG) == 0) {
      if (Clock::now() > end) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    fs::remove(log_);
  }

  // Its URL once it listens and /health says 200 (empty, with the log as a failure, if not
  // within 60 s).
  std::string ready() {
    const std::regex listening("listening on (http://127\\.0\\.0\\.1:[0-9]+)");
    const auto end = Clock::now() + std::chrono::seconds(60);
    std::string url;
    while (Clock::now() < end) {
      std::smatch m;
      const std::string text = log();
      if (url.empty() && std::regex_search(text, m, listening)) url = m[1];
      if (!url.empty()) {
        httplib::Client client(url);
        auto res = client.Get("/health");
        if (res && res->status == 200) return url;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "golinear serve not ready within 60 s: " << log();
    return "";
  }

  std::string log() const {
    auto text = golinear::file_read_text(log_);
    return text.ok() ? *text : "";
  }

 private:
  static inline int count_ = 0;
  pid_t pid_ = -1;
  std::string log_;
};

struct LoadRun {
  int status = -1;     // exit status
  std::string output;  // stdout and stderr
};

LoadRun load(const std::string& args) {
  LoadRun run;
  FILE* pipe = ::popen((std::string(GOLINEAR_SERVE_LOAD) + " " + args + " 2>&1").c_str(), "r");
  if (!pipe) return run;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
    run.output.append(buffer, n);
  const int raw = ::pclose(pipe);
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return run;
}

// The first line of `text` that parses as a JSON object.
golinear::Json report_of(const std::string& text) {
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    auto json = golinear::json_parse(text.substr(begin, end - begin), "report");
    if (json.ok() && json->is_object()) return *json;
    begin = end + 1;
  }
  return {};
}

void expect_percentiles(const golinear::Json& report, const char* key) {
  SCOPED_TRACE(key);
  ASSERT_TRUE(report[key].is_object());
  ASSERT_TRUE(report[key]["p50"].is_number() && report[key]["p99"].is_number()) << report.dump();
  EXPECT_GT(report[key]["p50"].get<double>(), 0);
  EXPECT_GE(report[key]["p99"].get<double>(), report[key]["p50"].get<double>());
}

TEST(ServeLoad, StreamsAgainstTheServerAndReportsLatencies) {
  Server server({"--parallel", "2"});
  const std::string url = server.ready();
  ASSERT_FALSE(url.empty());
  const std::string json =
      (fs::temp_directory_path() / ("golinear_serve_load_" + std::to_string(::getpid()) + ".json"))
          .string();
  LoadRun run = load(url + " --concurrency 4 --requests 1 --max-tokens 8 --json " + json);
  ASSERT_EQ(run.status, 0) << run.output << server.log();
  golinear::Json report = report_of(run.output);
  EXPECT_EQ(report["requests"], 4) << run.output;
  EXPECT_EQ(report["errors"], 0);
  EXPECT_EQ(report["concurrency"], 4);
  EXPECT_EQ(report["max_tokens"], 8);
  EXPECT_EQ(report["generated_tokens"], 32);  // ignore_eos: every request runs to max_tokens
  EXPECT_GT(report["tokens_per_s"].get<double>(), 0);
  EXPECT_GT(report["seconds"].get<double>(), 0);
  expect_percentiles(report, "ttft_ms");
  expect_percentiles(report, "itl_ms");
  auto written = golinear::file_read_text(json);
  ASSERT_TRUE(written.ok()) << written.error();
  EXPECT_EQ(report_of(*written), report);  // --json writes the same report
  fs::remove(json);

  // Prompts of exactly P token ids: accepted and run, and past the context refused up front.
  run = load(url + " --concurrency 2 --requests 2 --max-tokens 4 --prompt-tokens 200");
  ASSERT_EQ(run.status, 0) << run.output << server.log();
  report = report_of(run.output);
  EXPECT_EQ(report["prompt_tokens"], 200);
  EXPECT_EQ(report["requests"], 4);
  EXPECT_EQ(report["generated_tokens"], 16);
  run = load(url + " --prompt-tokens 8190 --max-tokens 8");
  EXPECT_EQ(run.status, 2) << run.output;
  EXPECT_NE(run.output.find("more than the model's context of 8192 tokens"), std::string::npos)
      << run.output;
}

TEST(ServeLoad, FailedRequestsAreCountedAndFailTheRun) {
  // One slot and no queue: of three long requests sent at once, at least two get 503.
  Server server({"--parallel", "1", "--max-queue", "0"});
  const std::string url = server.ready();
  ASSERT_FALSE(url.empty());
  LoadRun run = load(url + " --concurrency 3 --requests 1 --max-tokens 256");
  EXPECT_EQ(run.status, 1) << run.output;
  golinear::Json report = report_of(run.output);
  ASSERT_TRUE(report.is_object()) << run.output;
  EXPECT_EQ(report["requests"], 3);
  EXPECT_GE(report["errors"].get<int>(), 2) << run.output;
  EXPECT_EQ(report["generated_tokens"].get<int>(), 256 * (3 - report["errors"].get<int>()));
  EXPECT_NE(run.output.find("failed: HTTP 503"), std::string::npos) << run.output;
}

TEST(ServeLoad, BadOptionsAndAnAbsentServerGetOneLine) {
  for (const char* args : {"", "http://127.0.0.1:1 --concurrency 0", "http://127.0.0.1:1 --bogus",
                           "ftp://127.0.0.1:1", "http://127.0.0.1:1 --prompt-tokens x"}) {
    SCOPED_TRACE(args);
    LoadRun run = load(args);
    EXPECT_EQ(run.status, 2) << run.output;
    EXPECT_EQ(run.output.rfind("golinear_serve_load: ", 0), 0u) << run.output;
    EXPECT_EQ(run.output.find('\n'), run.output.size() - 1) << run.output;  // one line
  }
  LoadRun run = load("http://127.0.0.1:1");  // nothing listens on port 1
  EXPECT_EQ(run.status, 1) << run.output;
  EXPECT_NE(run.output.find("/v1/models"), std::string::npos) << run.output;
}

}  // namespace
