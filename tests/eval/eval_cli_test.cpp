// `golinear eval` end to end on the random-weight Llama fixture: the plumbing (tables, --json,
// --log-samples line counts, finite values) and the one-line errors. The numbers themselves are
// checked by the unit tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sys/wait.h>

#include "common/json.h"

namespace golinear {
namespace {

const std::string kCli = GOLINEAR_CLI;
const std::string kModel = std::string(GOLINEAR_TEST_DATA) + "/fixtures/random-llama";
const std::string kData = std::string(GOLINEAR_TEST_DATA) + "/eval/";

struct CliRun {
  int status = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

CliRun run(const std::string& arguments) {
  const std::string base = ::testing::TempDir() + "eval_cli_" + std::to_string(::getpid());
  const std::string command = kCli + " " + arguments + " >" + base + ".out 2>" + base + ".err";
  CliRun result;
  const int raw = std::system(command.c_str());
  result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  result.out = read_all(base + ".out");
  result.err = read_all(base + ".err");
  return result;
}

std::vector<Json> read_lines(const std::string& path) {
  std::vector<Json> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(Json::parse(line));
  return lines;
}

class EvalCliTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EvalCliTest, LikelihoodTaskJsonAndSamples) {
  const std::string task = GetParam();
  const std::string samples = ::testing::TempDir() + "samples_" + task + ".jsonl";
  std::string extra = task == "mmlu" ? " --data " + kData + "mmlu_test.jsonl --dev " + kData +
                                           "mmlu_dev.jsonl --num-fewshot 2"
                                     : " --data " + kData + task + ".jsonl";
  CliRun result = run("eval " + task + " " + kModel + extra + " --json --log-samples " + samples);
  ASSERT_EQ(result.status, 0) << result.err;
  Json report = Json::parse(result.out);
  EXPECT_EQ(report["task"], task);
  ASSERT_FALSE(report["metrics"].empty());
  for (const Json& metric : report["metrics"]) {
    EXPECT_TRUE(std::isfinite(metric["value"].get<double>())) << metric.dump();
  }
  const std::vector<Json> lines = read_lines(samples);
  std::ifstream data(task == "mmlu" ? kData + "mmlu_test.jsonl" : kData + task + ".jsonl");
  long rows = 0;
  for (std::string line; std::getline(data, line);) rows += !line.empty();
  ASSERT_EQ((long)lines.size(), rows);
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["index"], i);
    for (const Json& ll : lines[i]["lls"]) EXPECT_TRUE(std::isfinite(ll.get<double>()));
    EXPECT_EQ(lines[i]["lls"].size(), lines[i]["is_greedy"].size());
    EXPECT_TRUE(lines[i]["correct"].is_boolean());
    EXPECT_TRUE(lines[i]["pred"].is_number_integer());
  }
}

INSTANTIATE_TEST_SUITE_P(Tasks, EvalCliTest,
                         ::testing::Values("piqa", "arc_easy", "hellaswag", "winogrande", "lambada", "mmlu"));

TEST(EvalCli, TableOnStdoutAndLegacyConvention) {
  CliRun table = run("eval piqa " + kModel + " --data " + kData + "piqa.jsonl --limit 2");
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_EQ(table.out.rfind("task", 0), 0u) << table.out;
  EXPECT_NE(table.out.find("piqa  acc_norm"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("  2\n"), std::string::npos) << table.out;  // n after --limit 2
  CliRun legacy = run("eval piqa " + kModel + " --data " + kData + "piqa.jsonl --no-bos-legacy --json");
  ASSERT_EQ(legacy.status, 0) << legacy.err;
  EXPECT_EQ(Json::parse(legacy.out)["config"]["add_special_tokens"], false);
  EXPECT_EQ(Json::parse(legacy.out)["config"]["batch"], 1);  // the CPU's default
}

TEST(EvalCli, NeedleAndRulerSamples) {
  const std::string samples = ::testing::TempDir() + "samples_niah.jsonl";
  CliRun niah = run("eval niah " + kModel + " --length 320 --samples 2 --depths 10,90 --log-samples " + samples);
  ASSERT_EQ(niah.status, 0) << niah.err;
  EXPECT_NE(niah.out.find("niah_single_1@depth=90"), std::string::npos) << niah.out;
  const std::vector<Json> lines = read_lines(samples);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(lines[0]["generation"].is_string());
  EXPECT_TRUE(lines[0]["score"].is_number());
  EXPECT_EQ(lines[1]["depth"], 90.0);

  CliRun ruler = run("eval ruler " + kModel + " --length 320 --samples 1 --subtask variable_tracking --json");
  ASSERT_EQ(ruler.status, 0) << ruler.err;
  EXPECT_EQ(Json::parse(ruler.out)["metrics"][0]["task"], "vt");
}

// --batch N generates N samples together over CPU sequence slots: the same report and samples
// as one at a time (--batch 1), only config.batch differs.
TEST(EvalCli, SyntheticBatchGivesTheSameReport) {
  const std::string command = "eval ruler " + kModel + " --length 320 --samples 2 --subtask multikey --json";
  const std::string one_samples = ::testing::TempDir() + "samples_batch1.jsonl";
  const std::string three_samples = ::testing::TempDir() + "samples_batch3.jsonl";
  CliRun one = run(command + " --log-samples " + one_samples);
  CliRun three = run(command + " --batch 3 --log-samples " + three_samples);
  ASSERT_EQ(one.status, 0) << one.err;
  ASSERT_EQ(three.status, 0) << three.err;
  Json a = Json::parse(one.out), b = Json::parse(three.out);
  EXPECT_EQ(a["config"]["batch"], 1);
  EXPECT_EQ(b["config"]["batch"], 3);
  EXPECT_EQ(a["metrics"], b["metrics"]);
  const std::vector<Json> a_lines = read_lines(one_samples), b_lines = read_lines(three_samples);
  ASSERT_EQ(a_lines.size(), 2u);
  EXPECT_EQ(a_lines, b_lines);
}

TEST(EvalCli, MakeClozeWritesLambadaRows) {
  const std::string input = ::testing::TempDir() + "cloze_input.jsonl";
  const std::string output = ::testing::TempDir() + "cloze_output.jsonl";
  std::string passage;
  for (int i = 0; i < 8; ++i) passage += "The river runs quietly past the old stone mill. ";
  std::ofstream(input) << Json{{"text", passage + "\n\nfoo = bar[1]; // code is skipped\n"}}.dump() << "\n";
  CliRun result = run("eval make-cloze --input " + input + " --out " + output + " --min-words 20");
  ASSERT_EQ(result.status, 0) << result.err;
  const std::vector<Json> lines = read_lines(output);
  ASSERT_EQ(lines.size(), 1u);
  const std::string text = lines[0]["text"];
  EXPECT_EQ(text.back(), 'l');  // the final "." is removed: the text ends in the target word
  EXPECT_EQ(text.rfind(" mill"), text.size() - 5);
}

TEST(EvalCli, ErrorsAreOneLineAndNonZero) {
  struct Case {
    std::string arguments, expected;
  };
  const std::vector<Case> cases = {
      {"eval bogus " + kModel, "unknown task 'bogus'"},
      {"eval piqa " + kModel + " --data " + kData + "piqa_malformed.jsonl", "piqa_malformed.jsonl line 3: missing field 'sol2'"},
      {"eval piqa " + kModel, "--data FILE is required"},
      {"eval niah " + kModel + " --length 100000", "exceeds the limit of 4096 tokens (the model's max_position_embeddings"},
      {"eval niah " + kModel + " --variant 2 --length 512", "--haystack FILE"},
      {"eval ruler " + kModel + " --subtask nope", "unknown --subtask 'nope'"},
      {"eval mmlu " + kModel + " --data " + kData + "mmlu_test.jsonl", "--dev FILE"},
  };
  for (const Case& c : cases) {
    CliRun result = run(c.arguments);
    EXPECT_NE(result.status, 0) << c.arguments;
    EXPECT_NE(result.err.find(c.expected), std::string::npos) << c.arguments << "\n" << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  }
}

}  // namespace
}  // namespace golinear
