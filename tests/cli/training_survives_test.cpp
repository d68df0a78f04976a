// `golinear linearize` as a long run meets it: SIGKILL at several moments of both stages, each
// followed by --resume, must end bit-identical to an uninterrupted run and never leave OUT
// behind; a checkpoint that cannot be written, or a non-finite gradient, stops the run with one
// line and keeps the last good checkpoint.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "io/safetensors.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kLlama = std::string(GOLINEAR_TEST_DATA) + "/fixtures/random-llama";

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The inode of `path` (0 when absent): a checkpoint written anew (temporary + rename) changes it.
ino_t inode_of(const fs::path& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

class TrainingSurvives : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("golinear_survives_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream data(dir_ / "data.jsonl");
    for (int i = 0; i < 60; ++i)
      data << "{\"text\": \"Line " << i << " of a small corpus about the grass, the sky and the sun, number "
           << i * 13 << ".\"}\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `golinear linearize` of random-llama into `out` with `extra` options, started in the
  // background: its pid (stdout and stderr go to dir_/log).
  pid_t spawn(const std::string& out, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {GOLINEAR_CLI, "linearize", kLlama, "--data", (dir_ / "data.jsonl").string(),
                                     "--steps", "20", "--e2e-tokens", "640", "--seq-len", "32", "--sinks", "2",
                                     "--window", "6", "--seed", "3", "--out", out};
    args.insert(args.end(), extra.begin(), extra.end());
    const std::string log = (dir_ / "log").string();
    pid_t pid = ::fork();
    if (pid == 0) {
      FILE* f = std::freopen(log.c_str(), "w", stdout);
      if (f) ::dup2(::fileno(stdout), 2);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    return pid;
  }

  // Exit status of a finished run (−signal when killed).
  static int wait_for(pid_t pid) {
    int raw = 0;
    ::waitpid(pid, &raw, 0);
    return WIFEXITED(raw) ? WEXITSTATUS(raw) : -WTERMSIG(raw);
  }

  static bool finished(pid_t pid, int* status) {
    int raw = 0;
    if (::waitpid(pid, &raw, WNOHANG) != pid) return false;
    *status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -WTERMSIG(raw);
    return true;
  }

  std::string log() const { return slurp(dir_ / "log"); }

  fs::path dir_;
};

// One kill: when `file` (in OUT.partial) has been written anew since the start (empty: at the
// start), wait `delay_ms` more, then SIGKILL.
struct Kill {
  std::string file;
  int delay_ms;
};

TEST_F(TrainingSurvives, KilledAndResumedRunsEndBitIdentical) {
  const std::string straight = (dir_ / "straight").string();
  const auto t0 = Clock::now();
  ASSERT_EQ(wait_for(spawn(straight, {})), 0) << log();
  const int run_ms = (int)std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  const std::string expected = slurp(straight + "/linearization.safetensors");
  ASSERT_FALSE(expected.empty());

  const std::string out = (dir_ / "killed").string(), partial = out + ".partial";
  // Checkpoints every 2 steps of 20 in each stage; kills right after one and in between. A kill
  // right after a checkpoint lets the run gain exactly one checkpoint, and one in between waits
  // 1 ms (a step of this tiny run takes about that): a stage lasts well past three kills however
  // loaded the machine (delays in fractions of the whole run's time let a stage finish: most of
  // that time is loading, not steps).
  const std::vector<Kill> kills = {
      {"", 5},
      {"transfer_state.safetensors", 0},
      {"transfer_state.safetensors", 1},
      {"transfer_state.safetensors", 0},
      {"transfer_report.json", 0},
      {"e2e_state.safetensors", 0},
      {"e2e_state.safetensors", 1},
      {"e2e_state.safetensors", 0},
      {"linearization.safetensors", 0},
  };
  int killed = 0, killed_in_transfer = 0, killed_in_e2e = 0;
  bool done = false;
  for (const Kill& kill : kills) {
    SCOPED_TRACE("kill when " + (kill.file.empty() ? std::string("started") : kill.file) + " + " +
                 std::to_string(kill.delay_ms) + " ms");
    // A milestone of stage 1 that a previous kill already passed does not come again.
    const bool stage1_file = kill.file == "transfer_state.safetensors" || kill.file == "transfer_report.json";
    if (stage1_file && fs::exists(fs::path(partial) / "transfer_report.json")) continue;
    const fs::path watched = fs::path(partial) / kill.file;
    const ino_t before = kill.file.empty() ? 0 : inode_of(watched);
    pid_t pid = spawn(out, fs::exists(partial) ? std::vector<std::string>{"--resume"} : std::vector<std::string>{});
    int status = 0;
    bool exited = false;
    while (!kill.file.empty() && !(exited = finished(pid, &status))) {
      const ino_t now = inode_of(watched);
      if (now != 0 && now != before) break;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (!exited) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kill.delay_ms));
      // Where the run stands when it dies: in stage 1 until transfer_report.json exists.
      const bool in_e2e = fs::exists(fs::path(partial) / "transfer_report.json");
      ::kill(pid, SIGKILL);
      status = wait_for(pid);
      if (status == -SIGKILL) {
        ++killed;
        (in_e2e ? killed_in_e2e : killed_in_transfer) += kill.file != "linearization.safetensors";
      }
    }
    if (status == 0) {  // it finished before the kill landed
      done = true;
      break;
    }
    ASSERT_EQ(status, -SIGKILL) << log();
    // A killed run never leaves OUT, only OUT.partial (or nothing, killed before it existed).
    EXPECT_FALSE(fs::exists(out));
  }
  if (!done) {
    ASSERT_EQ(wait_for(spawn(out, {"--resume"})), 0) << log();
  }
  EXPECT_FALSE(fs::exists(partial));
  ASSERT_TRUE(fs::exists(out + "/linearization.json"));
  for (const auto& e : fs::directory_iterator(out))  // no temporary of a killed write in OUT
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  EXPECT_EQ(slurp(out + "/linearization.safetensors"), expected);
  // Kills in both stages, or the test shows nothing.
  EXPECT_GE(killed_in_transfer, 3);
  EXPECT_GE(killed_in_e2e, 3);
  std::printf("[ killed %d times (%d in attention transfer, %d in distillation), uninterrupted run %d ms; "
              "bit-identical: %s ]\n", killed, killed_in_transfer, killed_in_e2e, run_ms,
              slurp(out + "/linearization.safetensors") == expected ? "yes" : "NO");
}

// A checkpoint that cannot be written (here: a file-size limit, as a full disk refuses the
// write) ends the run in one line naming the file; the checkpoint before it stays usable.
TEST_F(TrainingSurvives, AnUnwritableCheckpointKeepsTheLastGoodOne) {
  const std::string out = (dir_ / "full").string(), partial = out + ".partial";
  ASSERT_EQ(wait_for(spawn(out, {"--stage", "transfer", "--stop-after", "4"})), 3) << log();
  const std::string state = partial + "/transfer_state.safetensors";
  const std::string good = slurp(state);
  ASSERT_FALSE(good.empty());
  // The resumed run may write files of at most 8 KiB: the next checkpoint (~36 KiB) fails.
  const std::string limited = "sh -c 'trap \"\" XFSZ; ulimit -f 16; exec \"$0\" \"$@\"' " + std::string(GOLINEAR_CLI) +
                              " linearize " + kLlama + " --data " + (dir_ / "data.jsonl").string() +
                              " --steps 20 --seq-len 32 --sinks 2 --window 6 --seed 3 --stage transfer --resume --out " +
                              out + " >" + (dir_ / "log").string() + " 2>" + (dir_ / "err").string();
  const int raw = std::system(limited.c_str());
  ASSERT_TRUE(WIFEXITED(raw));
  EXPECT_NE(WEXITSTATUS(raw), 0);
  const std::string err = slurp(dir_ / "err");
  const std::string last_line = err.substr(err.rfind('\n', err.size() - 2) + 1);
  EXPECT_EQ(last_line.rfind("golinear: " + state + ": write failed (File too large); the last good "
                            "checkpoint, step 4, is kept in " + state, 0), 0u) << err;
  EXPECT_EQ(slurp(state), good);
  EXPECT_FALSE(fs::exists(out));
  for (const auto& e : fs::directory_iterator(partial))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  // Resumed with room again, it finishes as an uninterrupted run does.
  ASSERT_EQ(wait_for(spawn(out, {"--stage", "transfer", "--resume"})), 0) << log();
  const std::string straight = (dir_ / "straight").string();
  ASSERT_EQ(wait_for(spawn(straight, {"--stage", "transfer"})), 0) << log();
  EXPECT_EQ(slurp(out + "/linearization.safetensors"), slurp(straight + "/linearization.safetensors"));
  // An --out that cannot be created: one line.
  const int bad = std::system((std::string(GOLINEAR_CLI) + " linearize " + kLlama + " --data " +
                               (dir_ / "data.jsonl").string() + " --steps 2 --seq-len 32 --out /dev/null/run 2>" +
                               (dir_ / "err").string()).c_str());
  EXPECT_NE(WEXITSTATUS(bad), 0);
  // (after the line "tokenizing DATA")
  const std::string unwritable = slurp(dir_ / "err");
  const std::string unwritable_last = unwritable.substr(unwritable.rfind('\n', unwritable.size() - 2) + 1);
  EXPECT_EQ(unwritable.find("golinear: "), unwritable.rfind("golinear: ")) << unwritable;
  EXPECT_EQ(unwritable_last, "golinear: /dev/null/run.partial: cannot create directory (Not a directory)\n");
}

// A NaN gradient (injected by --inject-nan STEP,LAYER) stops either stage at that step, naming
// step and layer, with the checkpoint of the step before kept and finite.
TEST_F(TrainingSurvives, ANonFiniteGradientStopsTheRunNamingStepAndLayer) {
  struct Case {
    std::vector<std::string> options;
    std::string state, message;
  };
  const std::vector<Case> cases = {
      {{"--stage", "transfer", "--steps", "10", "--inject-nan", "6,1"}, "transfer_state.safetensors",
       "golinear: transfer: the gradient of layer 1 became non-finite at step 6 (nmse "},
      {{"--stage", "e2e", "--steps", "10", "--inject-nan", "3,0"}, "e2e_state.safetensors",
       "golinear: distill: the gradient of layer 0 became non-finite at step 3 (kl "},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.state);
    const std::string out = (dir_ / ("nan_" + c.state)).string(), partial = out + ".partial";
    EXPECT_EQ(wait_for(spawn(out, c.options)), 1);
    const std::string text = log();
    const std::string last_line = text.substr(text.rfind('\n', text.size() - 2) + 1);
    EXPECT_EQ(last_line.rfind(c.message, 0), 0u) << text;
    // Checkpoints: every step of the 10 of stage 1, every 2 of the 20 of stage 2.
    const long kept = c.state == "e2e_state.safetensors" ? 2 : 5;
    EXPECT_NE(last_line.find("the last good checkpoint, step " + std::to_string(kept) + ", is kept in " +
                             partial + "/" + c.state),
              std::string::npos) << last_line;
    EXPECT_FALSE(fs::exists(out));
    auto state = golinear::SafetensorsFile::open(partial + "/" + c.state);
    ASSERT_TRUE(state.ok()) << state.error();
    EXPECT_EQ((*state)->metadata().at("step"), std::to_string(kept));
    for (const golinear::TensorView& t : (*state)->tensors()) {
      std::vector<float> values(t.numel());
      ASSERT_TRUE(golinear::tensor_to_f32(t, values.data(), c.state).ok());
      for (float v : values) ASSERT_TRUE(std::isfinite(v)) << t.name;
    }
  }
}

}  // namespace
