// Per-layer exact budgets (issue 14): the window allocation at a fixed total
// (train/exact_budget.h) and per-layer sinks/windows through the recipe
// (model/linearization.h): mixers built with them, saved and loaded back, bad lists refused.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <numeric>

#include "common/file.h"
#include "mixers/hybrid_mixer.h"
#include "model/linearization.h"
#include "train/exact_budget.h"

namespace golinear::train {
namespace {

namespace fs = std::filesystem;

const std::string kFixtures = std::string(GOLINEAR_TEST_DATA) + "/fixtures/";

long sum(const std::vector<int>& v) { return std::accumulate(v.begin(), v.end(), 0L); }

TEST(AllocateWindows, EqualSignalKeepsTheUniformWindows) {
  auto w = allocate_windows({0.2, 0.2, 0.2, 0.2}, 56);
  ASSERT_TRUE(w.ok()) << w.error();
  EXPECT_EQ(*w, (std::vector<int>{56, 56, 56, 56}));
}

TEST(AllocateWindows, ProportionalAtTheSameTotalInQuantaAboveTheMinimum) {
  const std::vector<double> signal{0.10, 0.01, 0.07, 0.15, 0.03, 0.08, 0.12, 0.08};
  auto w = allocate_windows(signal, 56);
  ASSERT_TRUE(w.ok()) << w.error();
  EXPECT_EQ(sum(*w), 8 * 56);
  for (size_t l = 0; l < w->size(); ++l) {
    EXPECT_GE((*w)[l], 8) << l;
    EXPECT_EQ((*w)[l] % 8, 0) << l;
  }
  // Ordered as the signal: the hardest layer gets the most, the easiest the least.
  EXPECT_EQ(std::max_element(w->begin(), w->end()) - w->begin(), 3);
  EXPECT_EQ((*w)[1], 16);
  // One quantum (8) each, then the 48 quanta left shared 10:1:7:15:3:8:12:8 (of 64), floored,
  // the two left to the largest remainders (layers 1 and 0).
  EXPECT_EQ(*w, (std::vector<int>{72, 16, 48, 96, 24, 56, 80, 56}));
}

TEST(AllocateWindows, LayersWithoutSignalKeepTheirWindowAndAreNotCounted) {
  auto w = allocate_windows({1.0, -1.0, 3.0}, 40);
  ASSERT_TRUE(w.ok()) << w.error();
  EXPECT_EQ((*w)[1], 40);
  EXPECT_EQ((*w)[0] + (*w)[2], 80);
  EXPECT_EQ((*w)[0], 24);
  EXPECT_EQ((*w)[2], 56);
}

TEST(AllocateWindows, TotalNotAMultipleOfTheQuantumIsKept) {
  auto w = allocate_windows({1.0, 2.0, 3.0}, 13);
  ASSERT_TRUE(w.ok()) << w.error();
  EXPECT_EQ(sum(*w), 39);
}

TEST(AllocateWindows, RefusesWhatCannotBeAllocated) {
  auto zero = allocate_windows({0.0, 0.0}, 56);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error().find("zero"), std::string::npos) << zero.error();
  auto small = allocate_windows({1.0, 1.0}, 4);  // 8 keys in all, 8 each needed
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.error().find("exceed the total"), std::string::npos) << small.error();
}

class LayerBudgetsDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("golinear_budgets_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::copy(kFixtures + "random-llama", dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(LayerBudgetsDir, PerLayerWindowsBuildSaveAndLoad) {
  auto model = model_load(dir_.string());
  ASSERT_TRUE(model.ok()) << model.error();
  const int L = (*model)->config.num_layers;
  ASSERT_GE(L, 2);
  mixers::MixerOptions options;
  options.mix = mixers::MixKind::split;
  LayerBudgets budgets;
  for (int l = 0; l < L; ++l) budgets.sinks.push_back(l == 0 ? 2 : 4), budgets.windows.push_back(8 + 16 * l);
  auto stack = linearized_mixers(**model, options, {}, 3, budgets);
  ASSERT_TRUE(stack.ok()) << stack.error();
  for (int l = 0; l < L; ++l) {
    const auto* h = dynamic_cast<const mixers::HybridMixer*>((*stack)[l].get());
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(h->options().sinks, budgets.sinks[l]);
    EXPECT_EQ(h->options().window, budgets.windows[l]);
  }
  (*model)->mixers = std::move(*stack);
  ASSERT_TRUE(linearization_save(**model, linearization_recipe_of(**model, options, budgets), dir_.string()).ok());
  auto loaded = model_load(dir_.string());
  ASSERT_TRUE(loaded.ok()) << loaded.error();
  for (int l = 0; l < L; ++l) {
    const auto* h = dynamic_cast<const mixers::HybridMixer*>((*loaded)->mixers[l].get());
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(h->options().window, budgets.windows[l]) << l;
    EXPECT_EQ(h->options().sinks, budgets.sinks[l]) << l;
    EXPECT_EQ(h->options().mix, mixers::MixKind::split);
  }
}

TEST_F(LayerBudgetsDir, ListsOfTheWrongLengthOrValuesAreRefused) {
  auto model = model_load(dir_.string());
  ASSERT_TRUE(model.ok()) << model.error();
  const int L = (*model)->config.num_layers;
  LayerBudgets short_list;
  short_list.windows.assign(L + 1, 8);
  auto a = linearized_mixers(**model, {}, {}, 3, short_list);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().find("the model has"), std::string::npos) << a.error();
  LayerBudgets negative;
  negative.windows.assign(L, 8);
  negative.windows[L - 1] = -1;
  auto b = linearized_mixers(**model, {}, {}, 3, negative);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().find("layer " + std::to_string(L - 1)), std::string::npos) << b.error();
}

// An analysis's summary.json as a signal: its first student's layer sensitivity, negative values
// (noise) as 0, layers that student kept softmax (null) not counted; anything else refused.
TEST(AnalysisSensitivity, ReadsTheFirstStudentsLayerSensitivity) {
  const fs::path dir = fs::temp_directory_path() / ("golinear_sensitivity_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    const std::string path = (dir / name).string();
    EXPECT_TRUE(file_write_atomic(path, text).ok());
    return path;
  };
  EXPECT_TRUE(is_analysis_summary("run/summary.json"));
  EXPECT_FALSE(is_analysis_summary("runs/probe"));
  const std::string good = write(
      "summary.json",
      R"({"format": "golinear.analysis", "students": [{"label": "a", "layer_sensitivity": [0.05, -0.001, null, 0.01]},)"
      R"( {"label": "b", "layer_sensitivity": [9, 9, 9, 9]}]})");
  auto s = analysis_layer_sensitivity(good, 4);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(*s, (std::vector<double>{0.05, 0.0, -1.0, 0.01}));
  auto w = allocate_windows(*s, 56);  // the kept layer keeps 56; 3 × 56 shared by the signal
  ASSERT_TRUE(w.ok()) << w.error();
  EXPECT_EQ((*w)[2], 56);
  EXPECT_EQ((*w)[0] + (*w)[1] + (*w)[3], 3 * 56);
  EXPECT_GT((*w)[0], (*w)[3]);
  EXPECT_EQ((*w)[1], 8);
  EXPECT_FALSE(analysis_layer_sensitivity(good, 5).ok());  // another number of layers
  // The shipped student's sensitivity (RESULTS.md §2d) with linearize's floor of 3 quanta gives
  // the windows measured there (24/64/56/192/24/32/32/24).
  auto shipped = allocate_windows({0.0, 0.012848, 0.009555, 0.051114, 0.000141, 0.001126, 0.001300, 0.000981}, 56, 8, 24);
  ASSERT_TRUE(shipped.ok()) << shipped.error();
  EXPECT_EQ(*shipped, (std::vector<int>{24, 64, 56, 192, 24, 32, 32, 24}));
  const std::string no_sensitivity =
      write("plain.json", R"({"format": "golinear.analysis", "students": [{"label": "a"}]})");
  auto e = analysis_layer_sensitivity(no_sensitivity, 4);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("--sensitivity"), std::string::npos) << e.error();
  EXPECT_FALSE(analysis_layer_sensitivity(write("other.json", R"({"format": "x"})"), 4).ok());
  EXPECT_FALSE(analysis_layer_sensitivity(write("text.json", R"({"format": "golinear.analysis", "students": [{"layer_sensitivity": [1, "x", 1, 1]}]})"), 4).ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace golinear::train
