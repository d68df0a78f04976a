// The analysis over a real (tiny) model: the student plumbing in-process (a student that is the
// teacher has NMSE 0), teacher-only hardness, and `golinear analyze` end to end on the
// random-llama fixture: the files, summary.json's per-layer fields, the atomic output.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <sstream>

#include "analysis/analyze.h"
#include "analysis/diagnostics.h"
#include "common/json.h"
#include "model/linearization.h"

namespace golinear::analysis {
namespace {

namespace fs = std::filesystem;

const std::string kFixture = std::string(GOLINEAR_TEST_DATA) + "/fixtures/random-llama";
const std::string kText = std::string(GOLINEAR_TEST_DATA) + "/tokenizer/sample.txt";

// A fresh scratch directory per test.
fs::path scratch_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() /
                       ("golinear_analysis_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

struct CliRun {
  int status = -1;
  std::string output;  // stdout and stderr
};

CliRun run_cli(const std::string& arguments) {
  CliRun run;
  const std::string command = std::string(GOLINEAR_CLI) + " " + arguments + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return run;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) run.output.append(buffer, n);
  const int status = ::pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

std::vector<int32_t> random_tokens(long n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens(n);
  for (auto& t : tokens) t = (int32_t)(rng() % (uint32_t)vocab);
  return tokens;
}

long line_count(const fs::path& path) {
  std::ifstream in(path);
  long n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

TEST(AnalysisRun, StudentsOnTheTeachersInputs) {
  auto model = model_load(kFixture);
  ASSERT_TRUE(model.ok()) << model.error();
  const int T = 24, N = 2, L = (*model)->config.num_layers;
  const std::vector<int32_t> tokens = random_tokens((long)N * T, (*model)->config.vocab_size, 7);
  // Student 1: layer 1 kept softmax (NMSE exactly 0), layer 0 the exact branch alone with a
  // window longer than the sequence: softmax attention again, up to float rounding.
  // Student 2: a freshly initialised GDN hybrid (short window): a visible error.
  mixers::MixerOptions exact;
  exact.kind = mixers::MixerKind::none;
  exact.sinks = 0;
  exact.window = 64;
  mixers::MixerOptions gdn;
  gdn.sinks = 2;
  gdn.window = 4;
  std::vector<StudentMixers> students(2);
  auto exact_mixers = linearized_mixers(**model, exact, {1}, 0);
  auto gdn_mixers = linearized_mixers(**model, gdn, {}, 0);
  ASSERT_TRUE(exact_mixers.ok() && gdn_mixers.ok());
  students[0] = {"exact", "", exact, std::move(*exact_mixers)};
  students[1] = {"gdn", "", gdn, std::move(*gdn_mixers)};
  AnalysisOptions options;
  options.sinks = 2;
  options.window = 4;
  auto result = analysis_run(**model, students, tokens.data(), N, T, options);
  ASSERT_TRUE(result.ok()) << result.error();
  const AnalysisResult& r = *result;
  ASSERT_EQ(r.L, L);
  ASSERT_EQ(r.students.size(), 2u);
  EXPECT_EQ(r.students[0].layer_kinds, (std::vector<std::string>{"none", "softmax"}));
  EXPECT_EQ(r.students[0].layer_nmse[1], 0.0);
  EXPECT_LT(r.students[0].layer_nmse[0], 1e-9);
  for (int l = 0; l < L; ++l) EXPECT_GT(r.students[1].layer_nmse[l], 1e-4) << "layer " << l;
  // With a short window, positions past s + w see a linear branch: the error grows there.
  EXPECT_EQ(r.students[1].position_nmse.size(), (size_t)L * T);
  for (int l = 0; l < L; ++l)
    for (int t = 0; t < T; ++t) {
      EXPECT_GE(r.position_concentration[(long)l * T + t], 0.0);
      EXPECT_LE(r.position_concentration[(long)l * T + t], 1.0 + 1e-6);
      EXPECT_GE(r.position_residual[(long)l * T + t], 0.0);
      EXPECT_LE(r.position_residual[(long)l * T + t], 1.0 + 1e-6);
      // Position 0 attends only to itself, a sink.
      if (t == 0) {
        EXPECT_NEAR(r.position_sink_mass[(long)l * T], 1.0, 1e-6);
      }
      // Far mass needs t ≥ s + w.
      if (t < 6) {
        EXPECT_EQ(r.position_far_mass[(long)l * T + t], 0.0);
      }
    }
  // Position 0: a single key is its own mean.
  for (int l = 0; l < L; ++l) {
    EXPECT_NEAR(r.position_concentration[(long)l * T], 1.0, 1e-5);
    EXPECT_EQ(r.position_residual[(long)l * T], 0.0);
  }
  // Every level is there, each rho in [-1, 1] (or NaN when undefined).
  std::set<std::string> levels;
  for (const Correlation& c : r.students[1].correlations) {
    levels.insert(c.level);
    if (!std::isnan(c.rho)) {
      EXPECT_GE(c.rho, -1.0);
      EXPECT_LE(c.rho, 1.0);
    }
    if (c.level == "token_linear") {
      EXPECT_EQ(c.n, (long)L * r.G * (T - 6)) << c.diagnostic;
    }
    if (c.level == "within_position") {
      EXPECT_EQ(c.n, T - 6) << c.diagnostic;
    }
  }
  EXPECT_EQ(levels, (std::set<std::string>{"layer", "token", "token_linear", "within_position"}));

  // The teacher-only hardness is the run's hardness, and selection takes it.
  auto hardness = teacher_layer_hardness(**model, tokens.data(), N, T);
  ASSERT_TRUE(hardness.ok()) << hardness.error();
  EXPECT_EQ(*hardness, r.hardness);
  auto chosen = select_full_layers(*hardness, 1, "hard");
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ((*chosen)[0], hardness_ranking(*hardness)[0]);
}

// Leave-one-layer-linearized sensitivity: a student that is the teacher (the exact branch with a
// window past the sequence) costs nothing in any layer; a fresh GDN hybrid with a short window
// changes it (random weights and tokens: either way) and, linearizing one layer, by what the
// whole student changes it; a layer kept softmax has none; the perplexities are those of plain forwards; the teacher is left as it was.
TEST(AnalysisRun, LayerSensitivityIsTheOneLayerPerplexityCost) {
  auto model = model_load(kFixture);
  ASSERT_TRUE(model.ok()) << model.error();
  Model& teacher = **model;
  const int T = 24, N = 2, L = teacher.config.num_layers, V = teacher.config.vocab_size;
  ASSERT_EQ(L, 2);
  const std::vector<int32_t> tokens = random_tokens((long)N * T, V, 9);
  mixers::MixerOptions exact;
  exact.kind = mixers::MixerKind::none;
  exact.sinks = 0;
  exact.window = 64;
  mixers::MixerOptions gdn;
  gdn.sinks = 2;
  gdn.window = 4;
  std::vector<StudentMixers> students(2);
  auto exact_mixers = linearized_mixers(teacher, exact, {}, 0);
  auto gdn_mixers = linearized_mixers(teacher, gdn, {1}, 0);
  ASSERT_TRUE(exact_mixers.ok() && gdn_mixers.ok());
  students[0] = {"exact", "", exact, std::move(*exact_mixers)};
  students[1] = {"gdn", "", gdn, std::move(*gdn_mixers)};
  // The teacher's perplexity by plain forwards, and its logits before.
  std::vector<float> logits((size_t)T * V), before((size_t)T * V), after((size_t)T * V);
  double nll = 0;
  for (int n = 0; n < N; ++n) {
    model_forward(teacher, tokens.data() + n * T, T, logits.data());
    for (float lp : logprobs_of_next_tokens(logits.data(), tokens.data() + n * T, T, V)) nll -= lp;
  }
  const double teacher_ppl = std::exp(nll / (N * (T - 1)));
  model_forward(teacher, tokens.data(), T, before.data());
  AnalysisOptions options;
  auto result = analysis_run(teacher, students, tokens.data(), N, T, options);
  ASSERT_TRUE(result.ok()) << result.error();
  ASSERT_TRUE(add_layer_sensitivity(teacher, students, *result, tokens.data(), N, T).ok());
  const StudentResult& e = result->students[0];
  const StudentResult& g = result->students[1];
  EXPECT_NEAR(e.teacher_ppl, teacher_ppl, 1e-9 * teacher_ppl);
  EXPECT_NEAR(e.student_ppl, teacher_ppl, 1e-5 * teacher_ppl);
  ASSERT_EQ(e.layer_sensitivity.size(), (size_t)L);
  for (int l = 0; l < L; ++l) EXPECT_NEAR(e.layer_sensitivity[l], 0.0, 1e-5) << "layer " << l;
  EXPECT_GT(std::abs(g.layer_sensitivity[0]), 1e-4);  // random weights: either sign
  EXPECT_TRUE(std::isnan(g.layer_sensitivity[1]));  // kept softmax
  EXPECT_NEAR(g.student_ppl / g.teacher_ppl - 1.0, g.layer_sensitivity[0], 1e-9);  // one layer
  bool has = false;
  for (const Correlation& c : g.correlations) has = has || c.diagnostic == "sensitivity";
  EXPECT_TRUE(has);
  // The teacher is the teacher again, its mixers softmax, its logits the same bits.
  for (int l = 0; l < L; ++l) EXPECT_EQ(teacher.mixers[l]->kind(), "softmax");
  model_forward(teacher, tokens.data(), T, after.data());
  EXPECT_EQ(before, after);
  EXPECT_EQ(students[1].mixers[0]->kind(), "gdn");
}

// The device-neutral measurement (what the GPU twin, analysis/cuda/analyze.h, plugs its forward
// and its mixer upload into): per sequence the device's NLL; each linearized layer swapped in,
// measured and swapped back, in layer order, kept-softmax layers untouched; the ratio of
// perplexities; a failing forward still swaps the layer back and its error comes out.
TEST(AnalysisRun, LayerSensitivityMeasurementSwapsEachLinearizedLayerOnce) {
  auto model = model_load(kFixture);
  ASSERT_TRUE(model.ok()) << model.error();
  Model& teacher = **model;
  auto student = linearized_mixers(teacher, mixers::MixerOptions{}, {1}, 0);  // L = 2, layer 1 softmax
  ASSERT_TRUE(student.ok()) << student.error();
  const int N = 3, T = 5;
  const std::vector<int32_t> tokens((size_t)N * T, 7);
  std::vector<std::string> calls;
  int swapped = -1;        // the layer now the student's
  bool fail = false;
  const SequenceNll nll = [&](const int32_t*, int n) -> Result<double> {
    EXPECT_EQ(n, T);
    calls.push_back(swapped < 0 ? "nll" : "nll" + std::to_string(swapped));
    if (fail && swapped >= 0) return make_error("device fault");
    return swapped < 0 ? 4.0 * (T - 1) : 5.0 * (T - 1);  // mean NLL 4, or 5 with layer 0 swapped
  };
  const LayerMixerSwap swap = [&](int l, bool to_student) -> Status {
    calls.push_back((to_student ? "in" : "out") + std::to_string(l));
    swapped = to_student ? l : -1;
    return ok_status();
  };
  double ppl = std::numeric_limits<double>::quiet_NaN();  // unknown: measured
  int steps = 0;
  auto s = layer_sensitivity(nll, swap, *student, tokens.data(), N, T, &ppl, [&] { ++steps; });
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_NEAR(ppl, std::exp(4.0), 1e-9);
  ASSERT_EQ(s->size(), 2u);
  EXPECT_NEAR((*s)[0], std::exp(1.0) - 1.0, 1e-9);
  EXPECT_TRUE(std::isnan((*s)[1]));
  EXPECT_EQ(steps, 2);
  EXPECT_EQ(calls, (std::vector<std::string>{"nll", "nll", "nll", "in0", "nll0", "nll0", "nll0", "out0"}));
  // A known teacher perplexity is taken as is: no teacher forwards, no step for them.
  calls.clear();
  steps = 0;
  double known = std::exp(3.0);
  auto k = layer_sensitivity(nll, swap, *student, tokens.data(), N, T, &known, [&] { ++steps; });
  ASSERT_TRUE(k.ok()) << k.error();
  EXPECT_NEAR((*k)[0], std::exp(2.0) - 1.0, 1e-9);
  EXPECT_EQ(known, std::exp(3.0));
  EXPECT_EQ(steps, 1);
  EXPECT_EQ(calls, (std::vector<std::string>{"in0", "nll0", "nll0", "nll0", "out0"}));
  calls.clear();
  fail = true;
  auto e = layer_sensitivity(nll, swap, *student, tokens.data(), N, T);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error(), "device fault");
  EXPECT_EQ(swapped, -1) << "the layer was not swapped back";
  EXPECT_EQ(calls.back(), "out0");
}

TEST(AnalysisRun, RefusesALinearizedTeacher) {
  auto model = model_load(kFixture);
  ASSERT_TRUE(model.ok()) << model.error();
  auto student = linearized_mixers(**model, mixers::MixerOptions{}, {}, 0);
  ASSERT_TRUE(student.ok());
  (*model)->mixers = std::move(*student);
  const std::vector<int32_t> tokens = random_tokens(16, 100, 1);
  auto result = analysis_run(**model, {}, tokens.data(), 1, 16, {});
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().find("not softmax attention"), std::string::npos) << result.error();
}

TEST(AnalyzeCommand, TeacherOnlyWritesEveryFile) {
  const fs::path dir = scratch_dir("teacher");
  const fs::path out = dir / "analysis";
  const CliRun run = run_cli("analyze " + kFixture + " --data " + kText + " --tokens 128 --seq-len 64 --out " + out.string());
  ASSERT_EQ(run.status, 0) << run.output;
  for (const char* file : {"summary.json", "layers.csv", "heads.csv", "positions.csv", "report.md",
                           "concentration_vs_position.svg", "residual_vs_position.svg",
                           "attention_mass.svg", "hardness.svg"})
    EXPECT_TRUE(fs::exists(out / file)) << file;
  EXPECT_FALSE(fs::exists(out / "nmse_vs_position.svg"));  // no student
  EXPECT_FALSE(fs::exists(dir / "analysis.partial"));

  std::ifstream in(out / "summary.json");
  std::stringstream text;
  text << in.rdbuf();
  auto summary = json_parse(text.str(), "summary.json");
  ASSERT_TRUE(summary.ok()) << summary.error();
  const Json& s = *summary;
  EXPECT_EQ(s["seq_len"], 64);
  EXPECT_EQ(s["sequences"], 2);
  ASSERT_EQ(s["layers"].size(), 2u);
  for (const Json& layer : s["layers"]) {
    for (const char* field : {"layer", "concentration", "residual", "sink_mass", "far_mass",
                              "hardness", "rank", "kv_heads"})
      EXPECT_TRUE(layer.contains(field) && !layer[field].is_null()) << field << " in " << layer.dump();
    EXPECT_GE(layer["concentration"].get<double>(), 0.0);
    EXPECT_LE(layer["concentration"].get<double>(), 1.0);
    EXPECT_GE(layer["residual"].get<double>(), 0.0);
    EXPECT_LE(layer["residual"].get<double>(), 1.0);
    EXPECT_GT(layer["sink_mass"].get<double>(), 0.0);
    EXPECT_LE(layer["sink_mass"].get<double>(), 1.0);
  }
  EXPECT_EQ(s["ranking"].size(), 2u);
  EXPECT_EQ(line_count(out / "layers.csv"), 1 + 2);
  EXPECT_EQ(line_count(out / "heads.csv"), 1 + 2 * 4);
  EXPECT_EQ(line_count(out / "positions.csv"), 1 + 2 * 64);

  // An existing --out is refused before any work.
  const CliRun again = run_cli("analyze " + kFixture + " --data " + kText + " --out " + out.string());
  EXPECT_NE(again.status, 0);
  EXPECT_NE(again.output.find("already exists"), std::string::npos) << again.output;
  fs::remove_all(dir);
}

TEST(AnalyzeCommand, StudentsAreComparedAndOverlaid) {
  const fs::path dir = scratch_dir("student");
  const fs::path student = dir / "gdn";
  const CliRun train = run_cli("linearize " + kFixture + " --data " + kText +
                            " --steps 2 --seq-len 64 --sinks 4 --window 12 --out " + student.string());
  ASSERT_EQ(train.status, 0) << train.output;
  const fs::path out = dir / "analysis";
  // The same student twice, as a comma list: two labelled series.
  const CliRun run = run_cli("analyze " + kFixture + " --data " + kText + " --tokens 128 --seq-len 64 --student " +
                          student.string() + "," + student.string() + " --out " + out.string());
  ASSERT_EQ(run.status, 0) << run.output;
  for (const char* file : {"nmse_vs_position.svg", "nmse_by_concentration.svg",
                           "nmse_by_residual.svg", "nmse_by_layer.svg", "hardness.svg"})
    EXPECT_TRUE(fs::exists(out / file)) << file;

  std::ifstream in(out / "summary.json");
  std::stringstream text;
  text << in.rdbuf();
  auto summary = json_parse(text.str(), "summary.json");
  ASSERT_TRUE(summary.ok()) << summary.error();
  const Json& s = *summary;
  EXPECT_EQ(s["sinks"], 4);  // from the student's recipe
  EXPECT_EQ(s["window"], 12);
  ASSERT_EQ(s["students"].size(), 2u);
  EXPECT_EQ(s["students"][0]["label"], "gdn");
  EXPECT_EQ(s["students"][1]["label"], "gdn#2");
  EXPECT_GT(s["students"][0]["nmse"].get<double>(), 0.0);
  EXPECT_EQ(s["students"][0]["nmse"], s["students"][1]["nmse"]);
  EXPECT_FALSE(s["students"][0]["correlations"].empty());
  for (const Json& layer : s["layers"]) {
    ASSERT_TRUE(layer.contains("students")) << layer.dump();
    EXPECT_GT(layer["students"]["gdn"]["nmse"].get<double>(), 0.0);
    EXPECT_TRUE(layer["students"]["gdn"].contains("hardness"));
  }
  std::ifstream svg_in(out / "nmse_vs_position.svg");
  std::stringstream svg;
  svg << svg_in.rdbuf();
  long series = 0;
  for (size_t at = svg.str().find("<path class=\"series\""); at != std::string::npos;
       at = svg.str().find("<path class=\"series\"", at + 1))
    ++series;
  EXPECT_EQ(series, 2);
  EXPECT_NE(std::ifstream(out / "report.md").peek(), EOF);
  fs::remove_all(dir);
}

TEST(AnalyzeCommand, ClearErrors) {
  const fs::path dir = scratch_dir("errors");
  CliRun run = run_cli("analyze " + kFixture + " --out " + (dir / "a").string());
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.output.find("--data FILE is required"), std::string::npos) << run.output;
  run = run_cli("analyze " + kFixture + " --data " + kText + " --student " + dir.string() +
                " --out " + (dir / "b").string());
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.output.find("linearization.json"), std::string::npos) << run.output;
  EXPECT_FALSE(fs::exists(dir / "b"));
  EXPECT_FALSE(fs::exists(dir / "b.partial"));
  // --sensitivity measures students, on the CPU.
  run = run_cli("analyze " + kFixture + " --data " + kText + " --sensitivity --out " + (dir / "c").string());
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.output.find("give --student DIR"), std::string::npos) << run.output;
  run = run_cli("analyze " + kFixture + " --data " + kText + " --student " + kFixture +
                " --sensitivity --device cuda --out " + (dir / "d").string());
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.output.find("--device"), std::string::npos) << run.output;  // "use --device cpu", or no CUDA build
  EXPECT_FALSE(fs::exists(dir / "c"));
  EXPECT_FALSE(fs::exists(dir / "d"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace golinear::analysis
