// The golinear binary as a user runs it: outputs, exit codes, and one clear line for each kind
// of bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/json.h"
#include "train/exact_budget.h"

namespace {

namespace fs = std::filesystem;

const std::string kFixtures = std::string(GOLINEAR_TEST_DATA) + "/fixtures/";
const std::string kLlama = kFixtures + "random-llama";

struct CliRun {
  int status;
  std::string out, err;
};

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("golinear_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  CliRun run(const std::string& args, const std::string& env = "") {
    const fs::path out = dir_ / "stdout", err = dir_ / "stderr";
    const std::string command = env + " " + GOLINEAR_CLI + " " + args + " >" + out.string() +
                                " 2>" + err.string() + " </dev/null";
    int raw = std::system(command.c_str());
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(out), slurp(err)};
  }

  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }

  // A copy of the random-llama fixture whose `file` is replaced by `text`.
  std::string broken_checkpoint(const std::string& file, const std::string& text) {
    const fs::path copy = dir_ / "ckpt";
    fs::create_directories(copy);
    for (const auto& e : fs::directory_iterator(kLlama)) fs::copy_file(e.path(), copy / e.path().filename());
    std::ofstream(copy / file, std::ios::trunc) << text;
    return copy.string();
  }

  // The one-line error contract: non-zero exit, exactly one line on stderr naming `what`.
  void expect_one_line_error(const CliRun& r, const std::string& what) {
    EXPECT_NE(r.status, 0);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
  }

  fs::path dir_;
};

// generate --input: every prompt's line is what --prompt gives for it alone (the same seed:
// --seed + its index), greedy and sampled, whatever --batch; bad input is one line.
TEST_F(Cli, GenerateInputFileEqualsOnePromptAtATime) {
  const std::vector<std::string> prompts = {"The grass", "Once upon a time there", "x"};
  std::string lines;
  for (const std::string& p : prompts) lines += golinear::Json{{"prompt", p}}.dump() + "\n";
  const std::string input = write("prompts.jsonl", lines);
  for (const std::string sampling : {"", " --temperature 0.9 --top-p 0.95 --seed 5"}) {
    std::vector<std::string> alone;
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::string options = " --max-new-tokens 6" + sampling;
      if (!sampling.empty()) options.replace(options.find("--seed 5"), 8, "--seed " + std::to_string(5 + i));
      CliRun one = run("generate " + kLlama + " --prompt \"" + prompts[i] + "\"" + options);
      ASSERT_EQ(one.status, 0) << one.err;
      alone.push_back(one.out);
    }
    for (const char* batch : {"1", "2", "8"}) {
      CliRun all = run("generate " + kLlama + " --input " + input + " --batch " + batch +
                       " --max-new-tokens 6" + sampling);
      ASSERT_EQ(all.status, 0) << all.err;
      std::istringstream out(all.out);
      std::string line;
      for (size_t i = 0; i < prompts.size(); ++i) {
        ASSERT_TRUE(std::getline(out, line)) << "batch " << batch;
        auto json = golinear::Json::parse(line);
        EXPECT_EQ(json["index"], i);
        EXPECT_EQ(json["prompt"], prompts[i]);
        EXPECT_EQ(prompts[i] + json["text"].get<std::string>() + "\n", alone[i])
            << "batch " << batch << sampling << ", prompt " << i;
        EXPECT_LE(json["completion_tokens"].get<int>(), 6);
      }
      EXPECT_FALSE(std::getline(out, line)) << "one line per prompt";
    }
  }
  const std::string bad = write("bad.jsonl", "{\"prompt\": \"ok\"}\n{\"text\": \"no prompt\"}\n");
  for (const std::string& args :
       {"generate " + kLlama + " --input " + bad, "generate " + kLlama + " --prompt a --input " + input,
        "generate " + kLlama + " --prompt a --batch 2", "generate " + kLlama + " --input " + input + " --batch 0"}) {
    CliRun r = run(args);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
  EXPECT_NE(run("generate " + kLlama + " --input " + bad).err.find("line 2"), std::string::npos);
}

TEST_F(Cli, InfoReportsTheArchitecture) {
  CliRun r = run("info " + kFixtures + "random-qwen3");
  ASSERT_EQ(r.status, 0) << r.err;
  golinear::Json info = golinear::Json::parse(r.out);
  EXPECT_EQ(info["architecture"], "Qwen3ForCausalLM");
  EXPECT_EQ(info["head_dim"], 32);
  EXPECT_EQ(info["layers"], 2);
  EXPECT_GT(info["parameters"].get<long>(), 0);
}

TEST_F(Cli, TokenizeWithAndWithoutSpecialTokens) {
  std::string input = write("in.jsonl", "{\"text\": \"Hello world\"}\n{\"text\": \"\"}\n");
  CliRun with = run("tokenize " + kLlama + " --input " + input);
  ASSERT_EQ(with.status, 0) << with.err;
  EXPECT_EQ(with.out, "{\"ids\":[0,41,7402,3153]}\n{\"ids\":[0]}\n");
  CliRun without = run("tokenize " + kLlama + " --input " + input + " --no-special");
  EXPECT_EQ(without.out, "{\"ids\":[41,7402,3153]}\n{\"ids\":[]}\n");
}

TEST_F(Cli, ScoreDecodeEqualsPrefill) {
  std::string input = write("in.jsonl", "{\"text\": \"The quick brown fox jumps over the lazy dog.\"}\n{\"ids\": [0, 5, 9, 200, 31]}\n");
  CliRun prefill = run("score " + kLlama + " --input " + input);
  CliRun decode = run("score " + kLlama + " --input " + input + " --mode decode");
  ASSERT_EQ(prefill.status, 0) << prefill.err;
  ASSERT_EQ(decode.status, 0) << decode.err;
  std::istringstream a(prefill.out), b(decode.out);
  std::string la, lb;
  int rows = 0;
  while (std::getline(a, la) && std::getline(b, lb)) {
    auto ja = golinear::Json::parse(la), jb = golinear::Json::parse(lb);
    EXPECT_EQ(ja["ids"], jb["ids"]);
    ASSERT_EQ(ja["logprobs"].size(), ja["ids"].size() - 1);
    for (size_t i = 0; i < ja["logprobs"].size(); ++i)
      EXPECT_NEAR(ja["logprobs"][i].get<double>(), jb["logprobs"][i].get<double>(), 1e-4);
    ++rows;
  }
  EXPECT_EQ(rows, 2);
}

TEST_F(Cli, GenerateIsDeterministicForASeed) {
  const std::string args = "generate " + kLlama + " --prompt 'Once upon' --max-new-tokens 6 --temperature 0.8 --top-p 0.9 --seed 3";
  CliRun a = run(args), b = run(args);
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.out.rfind("Once upon", 0), 0u);
}

TEST_F(Cli, BadInputGetsOneClearLine) {
  expect_one_line_error(run("frobnicate " + kLlama), "unknown command 'frobnicate'");
  expect_one_line_error(run("score " + kLlama + " --input x --bogus"), "unknown option --bogus");
  expect_one_line_error(run("generate " + kLlama + " --prompt hi --max-new-tokens abc"), "--max-new-tokens expects an integer");
  expect_one_line_error(run("score " + kLlama + " --input " + write("bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": \n")), "bad.jsonl:2");
  expect_one_line_error(run("score " + kLlama + " --input " + write("ids.jsonl", "{\"ids\": [1, 99999]}\n")), "token id 99999 outside the vocabulary");
  expect_one_line_error(run("score " + kLlama + " --input " + write("nofield.jsonl", "{\"txt\": 1}\n")), "expected a field \"text\" or \"ids\"");
  expect_one_line_error(run("info " + (dir_ / "nowhere").string()), "config.json");
  expect_one_line_error(run("score " + kLlama + " --input in.jsonl --mode sideways"), "--mode must be prefill or decode");
  expect_one_line_error(run("score " + kLlama + " --input " + write("float.jsonl", "{\"ids\": [1.7, 2]}\n")), "must hold integers");
  expect_one_line_error(run("score " + kLlama + " --input " + write("huge.jsonl", "{\"ids\": [1e20]}\n")), "must hold integers");
}

TEST_F(Cli, OutOfVocabularySpecialTokensAndBadRecipesAreRefused) {
  std::string config = slurp(kLlama + "/config.json");
  auto json = golinear::Json::parse(config);
  json["eos_token_id"] = 100000;
  expect_one_line_error(run("info " + broken_checkpoint("config.json", json.dump())), "eos_token_id 100000 is outside the vocabulary");
  fs::remove_all(dir_ / "ckpt");
  std::string data = write("data.jsonl", "{\"text\": \"" + std::string(200, 'c') + " words.\"}\n");
  const std::string common = "linearize " + kLlama + " --data " + data + " --steps 1 --seq-len 32 --stage transfer";
  expect_one_line_error(run(common + " --sweep " + write("nul.json", R"([{"name": "a b\u0000"}])") + " --out " + (dir_ / "s").string()), "plain directory name");
  expect_one_line_error(run(common + " --sweep " + write("f.json", R"([{"name": "x", "sinks": 2.9}])") + " --out " + (dir_ / "s").string()), "'sinks' must be an integer");
  // A linearization.json with a non-integer field is refused when loaded.
  const std::string out = (dir_ / "lin").string();
  ASSERT_EQ(run(common + " --out " + out).status, 0);
  auto recipe = golinear::Json::parse(slurp(out + "/linearization.json"));
  recipe["recipe"]["window"] = 5.5;
  std::ofstream(out + "/linearization.json", std::ios::trunc) << recipe.dump();
  expect_one_line_error(run("score " + out + " --input " + write("i.jsonl", "{\"ids\": [0, 1]}\n")), "'window' must be an integer");
  // The base checkpoint is never written through the output's links.
  EXPECT_EQ(slurp(kLlama + "/config.json"), config);
}

TEST_F(Cli, RandomCheckpointWritesACheckpointEveryCommandLoads) {
  const std::string out = (dir_ / "random").string();
  const std::string common = "random-checkpoint --config " + kFixtures + "random-qwen3/config.json" +
                             " --tokenizer " + kFixtures + "random-qwen3";
  CliRun r = run(common + " --out " + out + " --seed 3 --max-shard-size 400KB");
  ASSERT_EQ(r.status, 0) << r.err;
  golinear::Json summary = golinear::Json::parse(r.out);
  EXPECT_GT(summary["shards"].get<int>(), 1);
  EXPECT_TRUE(fs::exists(out + "/model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(out + "/model-00001-of-0000" + std::to_string(summary["shards"].get<int>()) + ".safetensors"));
  CliRun info = run("info " + out);
  ASSERT_EQ(info.status, 0) << info.err;
  EXPECT_EQ(golinear::Json::parse(info.out)["dtype"], "BF16");
  EXPECT_EQ(golinear::Json::parse(info.out)["parameters"], summary["parameters"]);
  CliRun score = run("score " + out + " --input " + write("in.jsonl", "{\"text\": \"Hello world\"}\n"));
  ASSERT_EQ(score.status, 0) << score.err;
  // The same seed writes the same bytes.
  ASSERT_EQ(run(common + " --out " + (dir_ / "again").string() + " --seed 3 --max-shard-size 400KB").status, 0);
  EXPECT_EQ(slurp(out + "/model-00002-of-0000" + std::to_string(summary["shards"].get<int>()) + ".safetensors"),
            slurp((dir_ / "again").string() + "/model-00002-of-0000" + std::to_string(summary["shards"].get<int>()) + ".safetensors"));

  expect_one_line_error(run(common + " --out " + out), "already exists");
  expect_one_line_error(run(common), "--out is required");
  expect_one_line_error(run(common + " --out " + (dir_ / "x").string() + " --max-shard-size 5XB"), "--max-shard-size");
  std::string bad = write("config.json", R"({"architectures": ["GPT2LMHeadModel"]})");
  expect_one_line_error(run("random-checkpoint --config " + bad + " --tokenizer " + kLlama + " --out " + (dir_ / "y").string()),
                        "unsupported architecture 'GPT2LMHeadModel'");
  EXPECT_FALSE(fs::exists(dir_ / "y"));
  // A tokenizer larger than the config's vocabulary is refused before anything is written.
  auto small = golinear::Json::parse(slurp(kLlama + "/config.json"));
  small["vocab_size"] = 100;
  small["bos_token_id"] = 0;
  small["eos_token_id"] = 1;
  std::string small_config = write("small.json", small.dump());
  expect_one_line_error(run("random-checkpoint --config " + small_config + " --tokenizer " + kLlama + " --out " + (dir_ / "z").string()),
                        "do not fit the vocab_size 100");
  EXPECT_FALSE(fs::exists(dir_ / "z"));
  EXPECT_FALSE(fs::exists(dir_ / "z.partial"));
}

TEST_F(Cli, BrokenCheckpointFilesAreNamed) {
  expect_one_line_error(run("info " + broken_checkpoint("config.json", "{\"architectures\": [")), "config.json: malformed JSON");
  fs::remove_all(dir_ / "ckpt");
  std::string input = write("in.jsonl", "{\"text\": \"hi\"}\n");
  expect_one_line_error(run("score " + broken_checkpoint("tokenizer.json", "{\"model\": 3}") + " --input " + input), "tokenizer.json");
  fs::remove_all(dir_ / "ckpt");
  expect_one_line_error(run("info " + broken_checkpoint("model.safetensors", "garbage!!")), "model.safetensors");
  fs::remove_all(dir_ / "ckpt");
  expect_one_line_error(run("info " + broken_checkpoint("config.json", slurp(kLlama + "/config.json").replace(slurp(kLlama + "/config.json").find("LlamaForCausalLM"), 16, "GPT2LMHeadModel"))), "unsupported architecture 'GPT2LMHeadModel'");
}

// --window-by an analysis's summary.json: the windows follow its student's layer sensitivity at
// the same total (2 layers × 32 keys in quanta of 8, at least 3 quanta each: a signal all on
// layer 1 gives 24 and 40, as allocate_windows gives); --select with it keeps that layer softmax; a
// summary without sensitivity, or no file, is refused in one line.
TEST_F(Cli, AnAnalysisSummarysSensitivityAllocatesWindowsAndSelectsFullLayers) {
  std::string data = write("data.jsonl", [] {
    std::string s;
    for (int i = 0; i < 40; ++i) s += "{\"text\": \"Document " + std::to_string(i) + ": the grass is green and the sky is blue.\"}\n";
    return s;
  }());
  const std::string summary = write("summary.json",
      R"({"format": "golinear.analysis", "students": [{"label": "s", "layer_sensitivity": [0.0, 0.3]}]})");
  const std::string out = (dir_ / "by_sensitivity").string();
  CliRun r = run("linearize " + kLlama + " --data " + data + " --steps 2 --seq-len 32 --sinks 2 --window 32 --stage transfer --window-by " + summary + " --out " + out);
  ASSERT_EQ(r.status, 0) << r.err;
  auto json = golinear::Json::parse(slurp(out + "/linearization.json"));
  const auto windows = json["recipe"]["layer_windows"].get<std::vector<int>>();
  auto want = golinear::train::allocate_windows({0.0, 0.3}, 32, 8, 24);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(windows, *want);
  EXPECT_EQ(windows, (std::vector<int>{24, 40}));
  // --keep-full 1 --select SUMMARY.json keeps the layer whose linearization costs most.
  const std::string kept = (dir_ / "kept_by_sensitivity").string();
  CliRun k = run("linearize " + kLlama + " --data " + data + " --steps 2 --seq-len 32 --sinks 2 --window 16 --stage transfer --window-by none --keep-full 1 --select " + summary + " --out " + kept);
  ASSERT_EQ(k.status, 0) << k.err;
  auto kept_json = golinear::Json::parse(slurp(kept + "/linearization.json"));
  EXPECT_EQ(kept_json["layers"], golinear::Json::parse(R"(["gdn", "softmax"])"));
  const std::string plain = write("plain.json", R"({"format": "golinear.analysis", "students": [{"label": "s"}]})");
  expect_one_line_error(run("linearize " + kLlama + " --data " + data + " --steps 2 --seq-len 32 --window 16 --stage transfer --window-by " + plain + " --out " + (dir_ / "x").string()), "--sensitivity");
  expect_one_line_error(run("linearize " + kLlama + " --data " + data + " --window-by " + (dir_ / "missing.json").string() + " --out " + (dir_ / "y").string()), "summary.json");
}

// The default recipe allocates the windows by a probe's layer sensitivity: a quarter of the
// transfer steps, then half that end-to-end, at uniform windows; each layer's perplexity cost
// (≥ 0, noise below no cost as 0) recorded with the windows allocate_windows gives at the same
// total with a floor of 3 quanta (uniform when no layer costs anything measurable).
TEST_F(Cli, TheDefaultAllocatesWindowsByAProbesLayerSensitivity) {
  std::string data = write("data.jsonl", [] {
    std::string s;
    for (int i = 0; i < 40; ++i) s += "{\"text\": \"Document " + std::to_string(i) + ": the grass is green and the sky is blue.\"}\n";
    return s;
  }());
  const std::string out = (dir_ / "by_default").string();
  CliRun r = run("linearize " + kLlama + " --data " + data + " --steps 8 --e2e-tokens 256 --seq-len 32 --batch 2 --sinks 2 --window 32 --out " + out);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("probe: 2 transfer steps"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("probe: 1 end-to-end steps"), std::string::npos) << r.err;
  auto json = golinear::Json::parse(slurp(out + "/linearization.json"));
  const auto& allocation = json["training"]["keep_full_selection"]["window_allocation"];
  EXPECT_EQ(allocation["signal"], "probe layer_sensitivity");
  EXPECT_EQ(allocation["probe_tokens"].get<long>(), (2 + 1) * 2 * 32);
  const auto values = allocation["values"].get<std::vector<double>>();
  ASSERT_EQ(values.size(), 2u);
  bool measured = false;
  for (double v : values) {
    EXPECT_GE(v, 0.0);
    measured = measured || v > 0.0;
  }
  const auto windows = json["recipe"]["layer_windows"].get<std::vector<int>>();
  EXPECT_EQ(allocation["windows"].get<std::vector<int>>(), windows);
  if (measured) {
    auto want = golinear::train::allocate_windows(values, 32, 8, 24);
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(windows, *want);
  } else {
    EXPECT_EQ(windows, (std::vector<int>{32, 32}));
  }
}

TEST_F(Cli, LinearizeWritesACheckpointThatLoadsAndResumes) {
  std::string data = write("data.jsonl", [] {
    std::string s;
    for (int i = 0; i < 40; ++i) s += "{\"text\": \"Document " + std::to_string(i) + ": the grass is green and the sky is blue, number " + std::to_string(i * 7) + ".\"}\n";
    return s;
  }());
  const std::string common = "linearize " + kLlama + " --data " + data + " --steps 4 --seq-len 32 --sinks 2 --window 6 --seed 1 --stage transfer";
  // Interrupted after 2 of 4 steps: OUT does not exist, OUT.partial holds the resume state.
  const std::string out = (dir_ / "lin").string();
  CliRun stopped = run(common + " --out " + out + " --stop-after 2");
  EXPECT_EQ(stopped.status, 3) << stopped.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(fs::exists(out + ".partial/transfer_state.safetensors"));
  expect_one_line_error(run(common + " --out " + out), "pass --resume");
  CliRun resumed = run(common + " --out " + out + " --resume");
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_TRUE(fs::exists(out + "/linearization.json"));
  EXPECT_FALSE(fs::exists(out + ".partial"));
  // The same run without interruption gives the same parameters, and the base weights are the
  // base model's bytes.
  const std::string straight = (dir_ / "straight").string();
  ASSERT_EQ(run(common + " --out " + straight).status, 0);
  EXPECT_EQ(slurp(out + "/linearization.safetensors"), slurp(straight + "/linearization.safetensors"));
  EXPECT_EQ(slurp(out + "/model.safetensors"), slurp(kLlama + "/model.safetensors"));
  // Every command loads the result; decode through the constant-memory cache equals prefill.
  std::string input = write("in.jsonl", "{\"text\": \"The grass is green and the sky is blue and the grass is green again, number 7.\"}\n");
  CliRun prefill = run("score " + out + " --input " + input);
  CliRun decode = run("score " + out + " --input " + input + " --mode decode");
  ASSERT_EQ(prefill.status, 0) << prefill.err;
  ASSERT_EQ(decode.status, 0) << decode.err;
  auto ja = golinear::Json::parse(prefill.out), jb = golinear::Json::parse(decode.out);
  ASSERT_GT(ja["logprobs"].size(), 10u);
  ASSERT_EQ(ja["logprobs"].size(), jb["logprobs"].size());
  for (size_t i = 0; i < ja["logprobs"].size(); ++i)
    EXPECT_NEAR(ja["logprobs"][i].get<double>(), jb["logprobs"][i].get<double>(), 1e-4);
  CliRun info = run("info " + out);
  ASSERT_EQ(info.status, 0) << info.err;
  auto described = golinear::Json::parse(info.out);
  EXPECT_EQ(described["linearization"]["recipe"]["mixer"], "gdn");
  EXPECT_EQ(described["linearization"]["layers"].size(), 2u);
  CliRun ppl = run("eval ppl " + out + " --input " + data + " --seq-len 32 --json");
  ASSERT_EQ(ppl.status, 0) << ppl.err;
  EXPECT_GT(golinear::Json::parse(ppl.out)["ppl"].get<double>(), 1.0);
  expect_one_line_error(run(common + " --out " + out), "already exists");
  expect_one_line_error(run("linearize " + kLlama + " --data " + data + " --out x --mixer transformer"), "transformer");
  expect_one_line_error(run("linearize " + kLlama + " --data " + data + " --out x --window -3"), "window");
}

TEST_F(Cli, BothStagesResumeAcrossTheStageBoundary) {
  std::string data = write("data.jsonl", [] {
    std::string s;
    for (int i = 0; i < 40; ++i) s += "{\"text\": \"Line " + std::to_string(i) + " of a small corpus about the grass, the sky and the sun.\"}\n";
    return s;
  }());
  // 2 transfer steps, then 4 distillation steps (4 × 32 tokens).
  const std::string common = "linearize " + kLlama + " --data " + data + " --steps 2 --e2e-tokens 128 --seq-len 32 --sinks 2 --window 6";
  const std::string out = (dir_ / "both").string(), straight = (dir_ / "straight").string();
  CliRun stopped = run(common + " --out " + out + " --stop-after 3");
  EXPECT_EQ(stopped.status, 3) << stopped.err;
  EXPECT_NE(stopped.err.find("distillation step 3 of 4"), std::string::npos) << stopped.err;
  EXPECT_FALSE(fs::exists(out));
  CliRun resumed = run(common + " --out " + out + " --resume");
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  ASSERT_EQ(run(common + " --out " + straight).status, 0);
  EXPECT_EQ(slurp(out + "/linearization.safetensors"), slurp(straight + "/linearization.safetensors"));
  auto recipe = golinear::Json::parse(slurp(out + "/linearization.json"));
  EXPECT_EQ(recipe["training"]["stage"], "both");
  EXPECT_EQ(recipe["training"]["e2e"]["steps"], 4);
  EXPECT_GT(recipe["training"]["transfer"]["final_nmse"].get<double>(), 0.0);
}

// --lora-rank: LoRA adapters on q/k/v/o trained by the end-to-end stage, recorded in
// linearization.json, saved with the mixers, resumed across an interruption, loaded (and merged)
// by the other commands; runs without an end-to-end stage, or with bad LoRA options, are refused.
TEST_F(Cli, LinearizeWithLoraTrainsSavesAndLoadsTheAdapters) {
  std::string data = write("data.jsonl", [] {
    std::string s;
    for (int i = 0; i < 40; ++i) s += "{\"text\": \"Line " + std::to_string(i) + " of a small corpus about the grass, the sky and the sun.\"}\n";
    return s;
  }());
  const std::string common = "linearize " + kLlama + " --data " + data +
                             " --steps 2 --e2e-tokens 128 --seq-len 32 --sinks 2 --window 6 --lora-rank 4 --lora-alpha 8 --lora-targets q,v,o";
  const std::string out = (dir_ / "lora").string(), straight = (dir_ / "straight").string();
  CliRun stopped = run(common + " --out " + out + " --stop-after 3");
  EXPECT_EQ(stopped.status, 3) << stopped.err;
  CliRun resumed = run(common + " --out " + out + " --resume");
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  ASSERT_EQ(run(common + " --out " + straight).status, 0);
  EXPECT_EQ(slurp(out + "/linearization.safetensors"), slurp(straight + "/linearization.safetensors"));
  auto recipe = golinear::Json::parse(slurp(out + "/linearization.json"));
  EXPECT_EQ(recipe["lora"]["rank"], 4);
  EXPECT_EQ(recipe["lora"]["scale"], 2.0);
  EXPECT_EQ(recipe["lora"]["targets"], golinear::Json({"q", "v", "o"}));
  EXPECT_EQ(recipe["training"]["e2e"]["lora_parameters"], 2 * (4 * 64 + 64 * 4 + 4 * 64 + 32 * 4 + 4 * 64 + 64 * 4));
  CliRun ppl = run("eval ppl " + out + " --input " + data + " --seq-len 32 --json");
  ASSERT_EQ(ppl.status, 0) << ppl.err;
  const double full_ppl = golinear::Json::parse(ppl.out)["ppl"].get<double>();
  EXPECT_GT(full_ppl, 1.0);
  // An adapter directory (--adapter) carries the LoRA tensors too and evaluates the same.
  const std::string adapter = (dir_ / "adapter").string();
  ASSERT_EQ(run(common + " --adapter --out " + adapter).status, 0);
  EXPECT_EQ(slurp(adapter + "/linearization.safetensors"), slurp(straight + "/linearization.safetensors"));
  CliRun adapter_ppl = run("eval ppl " + adapter + " --input " + data + " --seq-len 32 --json");
  ASSERT_EQ(adapter_ppl.status, 0) << adapter_ppl.err;
  EXPECT_EQ(golinear::Json::parse(adapter_ppl.out)["ppl"].get<double>(), full_ppl);

  const std::string base = "linearize " + kLlama + " --data " + data + " --seq-len 32 --out " +
                           (dir_ / "refused").string();
  expect_one_line_error(run(base + " --steps 1 --stage transfer --lora-rank 4"), "end-to-end stage");
  expect_one_line_error(run(base + " --steps 1 --lora-alpha 4"), "need --lora-rank");
  expect_one_line_error(run(base + " --steps 1 --stage e2e --lora-rank 4 --lora-targets q,x"), "'q,x'");
  expect_one_line_error(run(base + " --steps 1 --stage e2e --lora-rank 65"), "lora-rank");
  expect_one_line_error(run(base + " --steps 1 --stage e2e --lora-rank 4 --init " + out), "--init takes the recipe");
}

// --mixer none --no-conv has no parameters: the recipe is written at once, with no teacher or
// student forward (a training loop of a million steps would take hours), and it loads and
// evaluates like any linearized checkpoint.
TEST_F(Cli, ARecipeWithNothingToTrainIsWrittenWithoutTraining) {
  std::string data = write("data.jsonl", "{\"text\": \"" + std::string(300, 'd') + " and a line of text.\"}\n");
  const std::string out = (dir_ / "none").string();
  const auto t0 = std::chrono::steady_clock::now();
  CliRun r = run("linearize " + kLlama + " --data " + data + " --mixer none --no-conv --sinks 2 --window 6 "
                 "--steps 1000000 --e2e-tokens 32000000 --seq-len 32 --out " + out);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_LT(seconds, 30.0);
  EXPECT_NE(r.err.find("no trainable parameters"), std::string::npos) << r.err;
  auto summary = golinear::Json::parse(r.out);
  EXPECT_EQ(summary["transfer"]["steps"], 0);
  EXPECT_EQ(summary["e2e"]["steps"], 0);
  auto recipe = golinear::Json::parse(slurp(out + "/linearization.json"));
  EXPECT_EQ(recipe["recipe"]["mixer"], "none");
  EXPECT_EQ(recipe["layers"], golinear::Json({"none", "none"}));
  EXPECT_EQ(recipe["training"]["transfer"]["steps"], 0);
  EXPECT_EQ(recipe["training"]["trainable_parameters"], 0);
  EXPECT_FALSE(fs::exists(out + ".partial"));
  const std::string input = write("in.jsonl", "{\"text\": \"A line of text to score, with a few more words in it.\"}\n");
  CliRun prefill = run("score " + out + " --input " + input);
  CliRun decode = run("score " + out + " --input " + input + " --mode decode");
  ASSERT_EQ(prefill.status, 0) << prefill.err;
  ASSERT_EQ(decode.status, 0) << decode.err;
  auto ja = golinear::Json::parse(prefill.out), jb = golinear::Json::parse(decode.out);
  ASSERT_EQ(ja["logprobs"].size(), jb["logprobs"].size());
  for (size_t i = 0; i < ja["logprobs"].size(); ++i)
    EXPECT_NEAR(ja["logprobs"][i].get<double>(), jb["logprobs"][i].get<double>(), 1e-4);
  CliRun ppl = run("eval ppl " + out + " --input " + data + " --seq-len 32 --json");
  ASSERT_EQ(ppl.status, 0) << ppl.err;
  EXPECT_GT(golinear::Json::parse(ppl.out)["ppl"].get<double>(), 1.0);
}

TEST_F(Cli, KeepFullChoosesLayersByHardnessOrEvenly) {
  std::string data = write("data.jsonl", "{\"text\": \"" + std::string(400, 'a') + " the end of a long line of text.\"}\n");
  const std::string common = "linearize " + kLlama + " --data " + data + " --steps 1 --seq-len 32 --stage transfer --keep-full 1";
  ASSERT_EQ(run(common + " --select uniform --out " + (dir_ / "u").string()).status, 0);
  auto uniform = golinear::Json::parse(slurp(dir_ / "u" / "linearization.json"));
  EXPECT_EQ(uniform["layers"], golinear::Json({"gdn", "softmax"}));  // floor((0 + 0.5) · 2 / 1) = 1
  CliRun hard = run(common + " --select hard --out " + (dir_ / "h").string());
  ASSERT_EQ(hard.status, 0) << hard.err;
  auto chosen = golinear::Json::parse(slurp(dir_ / "h" / "linearization.json"));
  auto hardness = chosen["training"]["keep_full_selection"]["hardness"];
  ASSERT_EQ(hardness.size(), 2u);
  const int hardest = hardness[0].get<double>() >= hardness[1].get<double>() ? 0 : 1;
  EXPECT_EQ(chosen["layers"][hardest], "softmax");
  EXPECT_EQ(chosen["layers"][1 - hardest], "gdn");
  expect_one_line_error(run(common + " --select random --out x"), "--select must be hard, uniform or an analysis");
  expect_one_line_error(run("linearize " + kLlama + " --data " + data + " --out x --keep-full 3 --steps 1 --seq-len 32"), "--keep-full");
}

TEST_F(Cli, SweepTrainsSeveralRecipesAgainstOneTeacher) {
  std::string data = write("data.jsonl", "{\"text\": \"" + std::string(300, 'b') + " and the rest of a line of text.\"}\n");
  std::string sweep = write("sweep.json", R"([{"name": "pure-gla", "mixer": "gla", "sinks": 0, "window": 0},
                                              {"name": "default"},
                                              {"name": "hybrid", "keep_full": 1, "select": "uniform"}])");
  const std::string common = "linearize " + kLlama + " --data " + data + " --steps 2 --seq-len 32 --sinks 2 --window 6 --stage transfer";
  CliRun r = run(common + " --sweep " + sweep + " --out " + (dir_ / "sweep").string());
  ASSERT_EQ(r.status, 0) << r.err;
  auto gla = golinear::Json::parse(slurp(dir_ / "sweep" / "pure-gla" / "linearization.json"));
  EXPECT_EQ(gla["recipe"]["mixer"], "gla");
  EXPECT_EQ(gla["recipe"]["window"], 0);
  auto hybrid = golinear::Json::parse(slurp(dir_ / "sweep" / "hybrid" / "linearization.json"));
  EXPECT_EQ(hybrid["layers"], golinear::Json({"gdn", "softmax"}));
  // The default recipe trained alone gives the same parameters as inside the sweep.
  ASSERT_EQ(run(common + " --out " + (dir_ / "alone").string()).status, 0);
  EXPECT_EQ(slurp(dir_ / "alone" / "linearization.safetensors"),
            slurp(dir_ / "sweep" / "default" / "linearization.safetensors"));
  EXPECT_EQ(run("score " + (dir_ / "sweep" / "pure-gla").string() + " --input " + write("s.jsonl", "{\"text\": \"hi there\"}\n")).status, 0);
  expect_one_line_error(run(common + " --sweep " + write("bad.json", R"([{"name": "x", "mixer": "lstm"}])") + " --out " + (dir_ / "bad").string()), "lstm");
  expect_one_line_error(run(common + " --sweep " + write("dup.json", R"([{"name": "x"}, {"name": "x"}])") + " --out " + (dir_ / "dup").string()), "used twice");
}

}  // namespace

namespace {

TEST_F(Cli, InitStartsFromALinearizedCheckpoint) {
  std::string data = write("data.jsonl", [] {
    std::string s;
    for (int i = 0; i < 30; ++i) s += "{\"text\": \"Entry " + std::to_string(i) + ": green grass, blue sky, and the number " + std::to_string(i * 3) + ".\"}\n";
    return s;
  }());
  const std::string base = "linearize " + kLlama + " --data " + data + " --seq-len 32 --stage transfer";
  const std::string first = (dir_ / "first").string();
  ASSERT_EQ(run(base + " --steps 3 --sinks 2 --window 6 --keep-full-layers 1 --out " + first).status, 0);
  // One more step at a negligible learning rate: the recipe and the parameters are those of
  // `first`; a fresh run at the same rate stays at the identity initialisation.
  const std::string next = (dir_ / "next").string(), fresh = (dir_ / "fresh").string();
  CliRun r = run(base + " --steps 1 --lr 1e-8 --init " + first + " --out " + next);
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(run(base + " --steps 1 --lr 1e-8 --sinks 2 --window 6 --out " + fresh).status, 0);
  auto recipe = golinear::Json::parse(slurp(next + "/linearization.json"));
  EXPECT_EQ(recipe["layers"], golinear::Json({"gdn", "softmax"}));
  EXPECT_EQ(recipe["recipe"]["window"], 6);
  EXPECT_EQ(recipe["training"]["init"], first);
  const std::string input = write("in.jsonl", "{\"text\": \"Green grass and a blue sky, entry 12, number 36.\"}\n");
  auto score = [&](const std::string& dir) {
    CliRun s = run("score " + dir + " --input " + input);
    EXPECT_EQ(s.status, 0) << s.err;
    return golinear::Json::parse(s.out)["logprobs"];
  };
  auto a = score(first), b = score(next), c = score(fresh);
  ASSERT_EQ(a.size(), b.size());
  double init_gap = 0, fresh_gap = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    init_gap = std::max(init_gap, std::abs(a[i].get<double>() - b[i].get<double>()));
    fresh_gap = std::max(fresh_gap, std::abs(a[i].get<double>() - c[i].get<double>()));
  }
  EXPECT_LT(init_gap, 1e-4);
  EXPECT_GT(fresh_gap, 1e-3);
  expect_one_line_error(run(base + " --steps 1 --init " + first + " --mixer gla --out x"), "drop --mixer");
  expect_one_line_error(run(base + " --steps 1 --init " + kLlama + " --out x"), "not a linearized checkpoint");
}

}  // namespace

// --device cpu|cuda of generate, score, eval (ppl, likelihood and generation tasks), analyze and
// linearize:
// any other value is refused in one line; cuda is refused in one line by a build without CUDA,
// and by a CUDA build for this fixture, whose head_dim 16 the CUDA kernels do not implement.
TEST_F(Cli, DeviceOptionOfEveryCommandFailsInOneLine) {
  const std::string data = std::string(GOLINEAR_TEST_DATA) + "/eval/";
  const std::string text = std::string(GOLINEAR_TEST_DATA) + "/tokenizer/sample.txt";
  const std::string input = write("in.jsonl", "{\"text\": \"Hello world\"}\n");
  const std::string out = (dir_ / "analysis").string();
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"generate", "generate " + kLlama + " --prompt hi --max-new-tokens 2"},
      {"score", "score " + kLlama + " --input " + input},
      {"eval ppl", "eval ppl " + kLlama + " --input " + data + "lambada_corpus_val.jsonl --limit 1"},
      {"eval lambada", "eval lambada " + kLlama + " --data " + data + "lambada.jsonl --limit 2"},
      {"eval piqa", "eval piqa " + kLlama + " --data " + data + "piqa.jsonl --limit 2"},
      {"eval niah", "eval niah " + kLlama + " --length 512 --samples 1"},
      {"eval ruler", "eval ruler " + kLlama + " --length 512 --samples 1 --subtask multikey"},
      {"analyze", "analyze " + kLlama + " --data " + text + " --out " + out + " --tokens 64 --seq-len 32"},
      {"linearize", "linearize " + kLlama + " --data " + text + " --out " + out + " --steps 1 --seq-len 32"},
  };
  for (const auto& [name, args] : commands) {
    expect_one_line_error(run(args + " --device tpu"),
                          "golinear " + name + ": --device must be cpu or cuda, got 'tpu'");
    const CliRun cuda = run(args + " --device cuda");
    expect_one_line_error(cuda, name);
    const bool no_cuda_build = cuda.err.find("--device cuda needs the CUDA build") != std::string::npos;
    const bool unsupported =
        cuda.err.find("--device cuda: gpu model: head_dim 16 is not supported") != std::string::npos ||
        cuda.err.find("--device cuda: the GPU hybrid mixer supports head dim 64 or 128") != std::string::npos;
    EXPECT_TRUE(no_cuda_build || unsupported) << name << ": " << cuda.err;
    EXPECT_FALSE(fs::exists(out)) << name;
  }
}

// Every command of src/cli/cmd_*.cpp answers --help and -h with its usage on stdout and exit 0,
// and `golinear --help` lists it: a new command file without an entry in the table fails here.
TEST_F(Cli, EveryCommandAnswersHelp) {
  const fs::path cli_sources = fs::path(GOLINEAR_TEST_DATA) / ".." / ".." / "src" / "cli";
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(cli_sources)) {
    const std::string file = e.path().filename().string();
    if (file.rfind("cmd_", 0) != 0 || e.path().extension() != ".cpp") continue;
    std::string name = file.substr(4, file.size() - 8);
    std::replace(name.begin(), name.end(), '_', '-');
    names.push_back(name);
  }
  ASSERT_GE(names.size(), 9u);
  const CliRun overview = run("--help");
  ASSERT_EQ(overview.status, 0) << overview.err;
  EXPECT_EQ(run("-h").out, overview.out);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    EXPECT_NE(overview.out.find("\n  " + name + " "), std::string::npos) << overview.out;
    const CliRun help = run(name + " --help");
    EXPECT_EQ(help.status, 0) << help.err;
    EXPECT_TRUE(help.err.empty()) << help.err;
    EXPECT_EQ(help.out.rfind("usage: golinear " + name + " ", 0), 0u) << help.out;
    EXPECT_NE(help.out.find("\n  " + name + " "), std::string::npos) << help.out;
    EXPECT_EQ(run(name + " -h").out, help.out);
    // After other arguments too, and the usage error points at the same text.
    EXPECT_EQ(run(name + " " + kLlama + " --help").out, help.out);
  }
  EXPECT_EQ(run("eval ppl --help").out, run("eval --help").out);
  const CliRun bad = run("linearize " + kLlama + " --frobnicate");
  expect_one_line_error(bad, "unknown option --frobnicate (golinear linearize --help)");
  expect_one_line_error(run("eval ppl"), "missing argument (golinear eval ppl --help)");
}

// Context limits come from the model: max_position_embeddings (4096 for random-llama) while a
// softmax layer remains; past it for a model whose every layer is linear.
TEST_F(Cli, ContextLimitsFollowTheModel) {
  std::string data = write("data.jsonl", "{\"text\": \"" + std::string(300, 'c') + " and a line of text.\"}\n");
  const std::string common = "linearize " + kLlama + " --data " + data +
                             " --mixer none --no-conv --sinks 2 --window 6 --steps 1 --seq-len 32";
  const std::string linear = (dir_ / "linear").string(), hybrid = (dir_ / "hybrid").string();
  ASSERT_EQ(run(common + " --out " + linear).status, 0);
  ASSERT_EQ(run(common + " --keep-full-layers 1 --out " + hybrid).status, 0);
  const std::string ppl = "eval ppl %s --input " + data + " --seq-len 5000 --json";
  auto with = [](std::string text, const std::string& dir) { return text.replace(text.find("%s"), 2, dir); };
  expect_one_line_error(run(with(ppl, kLlama)),
                        "--seq-len 5000 exceeds the limit of 4096 tokens (the model's max_position_embeddings");
  expect_one_line_error(run(with(ppl, hybrid)), "a layer kept as softmax attention");
  CliRun long_window = run(with(ppl, linear));
  ASSERT_EQ(long_window.status, 0) << long_window.err;
  EXPECT_GT(golinear::Json::parse(long_window.out)["ppl"].get<double>(), 1.0);
  // Still bounded: a forward of 2^40 tokens fits no host.
  expect_one_line_error(run("eval ppl " + linear + " --input " + data + " --seq-len 1099511627776"),
                        "every layer is linear");
  expect_one_line_error(run("eval niah " + kLlama + " --length 5000"), "--length 5000 exceeds the limit of 4096");
}

namespace {

// linearize --adapter: OUT holds only the two linearization files and names the base (as given,
// relative to OUT); every command loads it as the same model as the full directory of the same
// run; another, missing or moved-away base is refused in one line; --init takes an adapter of
// the same base; the two directories move together.
TEST_F(Cli, AnAdapterLoadsInEveryCommandAsTheFullDirectory) {
  std::string data = write("data.jsonl", [] {
    std::string s;
    for (int i = 0; i < 30; ++i) s += "{\"text\": \"Record " + std::to_string(i) + ": the grass is green, the sky is blue, " + std::to_string(i * 5) + ".\"}\n";
    return s;
  }());
  fs::create_directories(dir_ / "models");
  fs::copy(kLlama, dir_ / "models" / "base");
  const std::string recipe = " --data " + data + " --steps 3 --seq-len 32 --sinks 2 --window 6 --seed 1 --stage transfer";
  const std::string in_dir = "cd " + dir_.string() + " &&";  // relative paths, from dir_
  CliRun made = run("linearize models/base" + recipe + " --out models/student --adapter", in_dir);
  ASSERT_EQ(made.status, 0) << made.err;
  const fs::path student = dir_ / "models" / "student";
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(student)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"linearization.json", "linearization.safetensors"}));
  auto json = golinear::Json::parse(slurp(student / "linearization.json"));
  EXPECT_EQ(json["base"]["path"], "../base");
  EXPECT_EQ(json["base"]["fingerprint"]["sha256"].get<std::string>().size(), 64u);
  const std::string full = (dir_ / "full").string();
  ASSERT_EQ(run("linearize " + kLlama + recipe + " --out " + full).status, 0);
  EXPECT_EQ(slurp(student / "linearization.safetensors"), slurp(full + "/linearization.safetensors"));

  // The same outputs from every command, byte for byte.
  const std::string input = write("in.jsonl", "{\"text\": \"The grass is green and the sky is blue, record 9, 45.\"}\n");
  auto same = [&](const std::string& command, const std::string& options) {
    CliRun a = run(command + " " + student.string() + " " + options);
    CliRun b = run(command + " " + full + " " + options);
    ASSERT_EQ(a.status, 0) << command << ": " << a.err;
    ASSERT_EQ(b.status, 0) << command << ": " << b.err;
    EXPECT_FALSE(a.out.empty()) << command;
    EXPECT_EQ(a.out, b.out) << command;
  };
  same("score", "--input " + input);
  same("score", "--input " + input + " --mode decode");
  same("tokenize", "--input " + input);
  same("generate", "--prompt \"The grass\" --max-new-tokens 8 --seed 3");
  same("eval ppl", "--input " + data + " --seq-len 32 --json");
  CliRun info = run("info " + student.string());
  ASSERT_EQ(info.status, 0) << info.err;
  auto described = golinear::Json::parse(info.out);
  EXPECT_EQ(described["adapter"]["base"], "../base");
  EXPECT_EQ(described["adapter"]["base_sha256"], json["base"]["fingerprint"]["sha256"]);
  EXPECT_EQ(described["linearization"]["layers"], golinear::Json({"gdn", "gdn"}));
  EXPECT_EQ(described["parameters"], golinear::Json::parse(run("info " + full).out)["parameters"]);
  CliRun analyzed = run("analyze " + kLlama + " --student " + student.string() + " --data " + data +
                        " --tokens 64 --seq-len 32 --out " + (dir_ / "analysis").string());
  EXPECT_EQ(analyzed.status, 0) << analyzed.err;

  // --init from the adapter: of this base, yes; of an edited copy, no.
  CliRun next = run("linearize models/base --data " + data + " --steps 1 --seq-len 32 --lr 1e-8 --init models/student --out models/next --adapter", in_dir);
  EXPECT_EQ(next.status, 0) << next.err;
  fs::copy(kLlama, dir_ / "edited");
  std::ofstream(dir_ / "edited" / "config.json", std::ios::app) << "\n";
  expect_one_line_error(run("linearize edited --data " + data + " --steps 1 --seq-len 32 --init models/student --out x", in_dir),
                        "config.json differs");
  // A sweep of adapters: each OUT/<name> names the base from its own directory.
  const std::string sweep = write("sweep.json", R"([{"name": "one"}])");
  CliRun swept = run("linearize models/base" + recipe + " --sweep " + sweep + " --out models/sweep --adapter", in_dir);
  ASSERT_EQ(swept.status, 0) << swept.err;
  EXPECT_EQ(golinear::Json::parse(slurp(dir_ / "models" / "sweep" / "one" / "linearization.json"))["base"]["path"],
            "../../base");
  EXPECT_FALSE(fs::exists(dir_ / "models" / "sweep" / "one" / "config.json"));
  EXPECT_EQ(run("score " + (dir_ / "models" / "sweep" / "one").string() + " --input " + input).status, 0);
  // A run interrupted without --adapter is not resumed as one.
  EXPECT_EQ(run("linearize models/base" + recipe + " --out models/half --stop-after 1", in_dir).status, 3);
  expect_one_line_error(run("linearize models/base" + recipe + " --out models/half --resume --adapter", in_dir),
                        "without --adapter");
  // An adapter of an adapter is refused (linearize its base instead).
  expect_one_line_error(run("linearize " + student.string() + recipe + " --out y --adapter"), "already linearized");

  // Both directories moved together: still the same model.
  const fs::path moved = dir_ / "moved" / "here";
  fs::create_directories(moved.parent_path());
  fs::rename(dir_ / "models", moved);
  CliRun after = run("score " + (moved / "student").string() + " --input " + input);
  ASSERT_EQ(after.status, 0) << after.err;
  EXPECT_EQ(after.out, run("score " + full + " --input " + input).out);
  // A tampered base, then a missing one: one line each, naming what is wrong.
  std::ofstream(moved / "base" / "config.json", std::ios::app) << " ";
  CliRun tampered = run("score " + (moved / "student").string() + " --input " + input);
  expect_one_line_error(tampered, "config.json differs");
  EXPECT_NE(tampered.err.find((moved / "base").string()), std::string::npos) << tampered.err;
  EXPECT_NE(tampered.err.find((moved / "student").string()), std::string::npos) << tampered.err;
  fs::remove_all(moved / "base");
  const std::string gone = (moved / "student").string();
  for (const std::string& command : {"info " + gone, "tokenize " + gone + " --input " + input,
                                    "score " + gone + " --input " + input,
                                    "eval ppl " + gone + " --input " + input})
    expect_one_line_error(run(command), "base checkpoint '../base'");
}

}  // namespace
