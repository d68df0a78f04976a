// LoRA on q/k/v/o (model/lora.h): B = 0 leaves the model unchanged, the backward through the
// frozen network gives dA, dB that match finite differences (mirroring tests/train's
// ModelBackward checks: fp32 forward, central differences), the fp32 merge agrees with the
// unmerged forward, linearization.{json,safetensors} round-trip the adapters exactly, and bad
// options or files are refused with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/file.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/linearization.h"
#include "model/lora.h"
#include "model/transformer_backward.h"

namespace golinear {
namespace {

namespace fs = std::filesystem;

const std::string kFixtures = std::string(GOLINEAR_TEST_DATA) + "/fixtures/";

std::unique_ptr<Model> load(const std::string& name) {
  auto loaded = model_load(kFixtures + name);
  EXPECT_TRUE(loaded.ok()) << loaded.error();
  return loaded.ok() ? std::move(*loaded) : nullptr;
}

// The model's mixers replaced (`keep_full` stay softmax), LoRA on the others.
void linearize_with_lora(Model& model, const std::vector<int>& keep_full, const LoraOptions& lora) {
  mixers::MixerOptions options;
  options.sinks = 2;
  options.window = 3;
  auto made = linearized_mixers(model, options, keep_full, 11);
  ASSERT_TRUE(made.ok()) << made.error();
  model.mixers = std::move(*made);
  std::vector<bool> adapted;
  for (const auto& m : model.mixers) adapted.push_back(m->kind() != "softmax");
  auto adapters = lora_create(model, lora, adapted, 5);
  ASSERT_TRUE(adapters.ok()) << adapters.error();
  model.lora = std::move(*adapters);
}

// Adds uniform noise of `amplitude` to every value of `params` (B moves away from 0).
void perturb(const std::vector<mixers::Parameter*>& params, float amplitude, uint64_t state) {
  for (auto* p : params)
    for (float& v : p->value) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      v += amplitude * (((state >> 40) & 0xffff) / 65536.0f - 0.5f);
    }
}

std::vector<int32_t> test_ids(int T, int V) {
  std::vector<int32_t> ids(T);
  for (int t = 0; t < T; ++t) ids[t] = (t * 977 + 5) % V;
  return ids;
}

std::vector<float> logits_of(const Model& model, const std::vector<int32_t>& ids) {
  std::vector<float> logits(ids.size() * (size_t)model.config.vocab_size);
  model_forward(model, ids.data(), (int)ids.size(), logits.data());
  return logits;
}

LoraOptions rank(int r, float alpha = 0.0f) {
  LoraOptions o;
  o.rank = r;
  o.alpha = alpha > 0 ? alpha : (float)r;
  return o;
}

TEST(Lora, ZeroBLeavesTheLogitsUnchangedAndNonZeroBChangesThem) {
  auto model = load("random-qwen2");  // q/k/v biases on the path
  ASSERT_TRUE(model);
  linearize_with_lora(*model, {}, rank(8));
  ASSERT_TRUE(model->lora.enabled());
  const auto ids = test_ids(10, model->config.vocab_size);
  const std::vector<float> with_lora = logits_of(*model, ids);
  LoraAdapters lora = std::move(model->lora);
  model->lora = LoraAdapters{};
  const std::vector<float> without = logits_of(*model, ids);
  EXPECT_EQ(with_lora, without);  // s·(x Aᵀ)·0 adds exact zeros
  for (auto& layer : lora.layers)
    for (auto& b : layer.B) perturb({&b}, 0.2f, 3);
  model->lora = std::move(lora);
  const std::vector<float> changed = logits_of(*model, ids);
  double diff = 0;
  for (size_t i = 0; i < changed.size(); ++i) diff = std::max(diff, (double)std::fabs(changed[i] - without[i]));
  EXPECT_GT(diff, 1e-3);
}

// Σ g·logits for fixed g: a loss whose gradient with respect to the logits is g.
double linear_loss(const Model& model, const std::vector<int32_t>& ids, const std::vector<float>& g) {
  const std::vector<float> logits = logits_of(model, ids);
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += (double)g[i] * logits[i];
  return sum;
}

void check_lora_gradient(const std::string& fixture, const std::vector<int>& keep_full,
                         const LoraOptions& options) {
  auto model = load(fixture);
  ASSERT_TRUE(model);
  linearize_with_lora(*model, keep_full, options);
  perturb(model->lora.parameters(), 0.3f, 99);
  const int T = 12, V = model->config.vocab_size;
  const auto ids = test_ids(T, V);
  std::vector<float> g((size_t)T * V);
  uint64_t state = 7;
  for (float& x : g) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    x = (((state >> 40) & 0xffff) / 65536.0f - 0.5f) / T;
  }
  ForwardTrace trace;
  trace.capture_activations = true;
  std::vector<float> logits((size_t)T * V);
  model_forward(*model, ids.data(), T, logits.data(), false, &trace);
  model_backward(*model, T, trace, g.data());

  struct Check {
    std::string name;
    double analytic, fd;
  };
  std::vector<Check> checks;
  for (auto& [name, p] : model->lora.named_parameters()) {
    for (size_t i : {(size_t)0, p->value.size() / 3, p->value.size() / 2, p->value.size() - 1}) {
      const float saved = p->value[i], h = 1e-2f;
      p->value[i] = saved + h;
      const double up = linear_loss(*model, ids, g);
      p->value[i] = saved - h;
      const double down = linear_loss(*model, ids, g);
      p->value[i] = saved;
      checks.push_back({str_cat(name, "[", i, "]"), p->grad[i], (up - down) / (2 * h)});
    }
  }
  // As tests/train's ModelBackward: fp32 forward, h = 1e-2, 2% of each value plus 0.5% of the
  // largest gradient checked. Fails when the scale is left out of one side (tried: alpha = 2r).
  double scale = 0;
  for (const Check& c : checks) scale = std::max(scale, std::fabs(c.fd));
  ASSERT_GT(scale, 0.0);
  for (const Check& c : checks)
    EXPECT_NEAR(c.analytic, c.fd, 0.02 * std::fabs(c.fd) + 0.005 * scale) << fixture << " " << c.name;
  EXPECT_GT(checks.size(), 10u);
}

TEST(LoraBackward, LlamaAllTargetsMatchesFiniteDifferences) {
  check_lora_gradient("random-llama", {}, rank(4));
}

TEST(LoraBackward, Qwen3QAndVWithScaleTwoAndASoftmaxLayerMatchesFiniteDifferences) {
  LoraOptions o = rank(4, 8.0f);  // s = 2
  o.targets = {true, false, true, false};
  check_lora_gradient("random-qwen3", {1}, o);
}

TEST(LoraBackward, Qwen2BiasesKAndOMatchesFiniteDifferences) {
  LoraOptions o = rank(3);
  o.targets = {false, true, false, true};
  check_lora_gradient("random-qwen2", {}, o);
}

TEST(Lora, OnlyLinearizedLayersCarryAdapters) {
  auto model = load("random-qwen3");
  ASSERT_TRUE(model);
  linearize_with_lora(*model, {1}, rank(4));
  EXPECT_TRUE(model->lora.layers[0].adapted);
  EXPECT_FALSE(model->lora.layers[1].adapted);
  EXPECT_TRUE(model->lora.layers[1].parameters().empty());
  // 4 targets × (A, B) on layer 0 only.
  EXPECT_EQ(model->lora.parameters().size(), 8u);
}

TEST(Lora, MergedWeightsGiveTheUnmergedLogits) {
  auto model = load("random-llama");
  ASSERT_TRUE(model);
  linearize_with_lora(*model, {}, rank(8, 16.0f));
  perturb(model->lora.parameters(), 0.5f, 21);
  const auto ids = test_ids(16, model->config.vocab_size);
  const std::vector<float> unmerged = logits_of(*model, ids);
  const std::vector<float> q_before = model->layers[0].q_proj;
  lora_merge_into_weights(*model);
  EXPECT_FALSE(model->lora.enabled());
  EXPECT_NE(model->layers[0].q_proj, q_before);
  const std::vector<float> merged = logits_of(*model, ids);
  // fp32: W + s·B A rounds once per weight; the logits (|x| ≲ 1) agree to ~1e-6. 1e-4 leaves
  // room for summation order and fails when a target is not merged (observed ≥ 1e-2).
  double worst = 0;
  for (size_t i = 0; i < merged.size(); ++i) worst = std::max(worst, (double)std::fabs(merged[i] - unmerged[i]));
  EXPECT_LT(worst, 1e-4);
}

class LoraCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("golinear_lora_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(LoraCheckpoint, SaveAndLoadGiveIdenticalLogits) {
  auto model = load("random-qwen3");
  ASSERT_TRUE(model);
  LoraOptions o = rank(4, 2.0f);
  o.targets = {true, true, false, true};
  linearize_with_lora(*model, {1}, o);
  perturb(model->lora.parameters(), 0.4f, 8);
  const auto ids = test_ids(12, model->config.vocab_size);
  const std::vector<float> before = logits_of(*model, ids);
  ASSERT_TRUE(checkpoint_copy_base(kFixtures + "random-qwen3", dir_.string()).ok());
  mixers::MixerOptions options;
  options.sinks = 2;
  options.window = 3;
  ASSERT_TRUE(linearization_save(*model, linearization_recipe_of(*model, options), dir_.string()).ok());

  auto json = json_read_file((dir_ / "linearization.json").string());
  ASSERT_TRUE(json.ok());
  EXPECT_EQ((*json)["lora"]["rank"], 4);
  EXPECT_EQ((*json)["lora"]["alpha"], 2.0);
  EXPECT_EQ((*json)["lora"]["scale"], 0.5);
  EXPECT_EQ((*json)["lora"]["targets"], Json({"q", "k", "o"}));

  auto loaded = model_load(dir_.string());
  ASSERT_TRUE(loaded.ok()) << loaded.error();
  ASSERT_TRUE((*loaded)->lora.enabled());
  EXPECT_EQ((*loaded)->lora.parameters().size(), 6u);  // layer 0: q, k, o × (A, B)
  EXPECT_EQ(logits_of(**loaded, ids), before);          // fp32 saved, fp32 read: exact

  // A file without one adapter, or a recipe of another rank, is refused with the reason.
  auto file = SafetensorsFile::open((dir_ / "linearization.safetensors").string());
  ASSERT_TRUE(file.ok());
  std::vector<std::vector<float>> kept;
  std::vector<TensorToWrite> tensors;
  for (const TensorView& view : (*file)->tensors()) {
    if (view.name == "layers.0.lora_k_B") continue;
    std::vector<float> values(view.numel());
    ASSERT_TRUE(tensor_to_f32(view, values.data(), "test").ok());
    kept.push_back(std::move(values));
    tensors.push_back({view.name, view.shape, nullptr});
  }
  for (size_t i = 0; i < tensors.size(); ++i) tensors[i].data = kept[i].data();
  file->reset();
  ASSERT_TRUE(safetensors_write((dir_ / "linearization.safetensors").string(), tensors, {}).ok());
  auto missing = model_load(dir_.string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("layers.0.lora_k_B"), std::string::npos) << missing.error();

  Json other = *json;
  other["lora"]["rank"] = 5;
  ASSERT_TRUE(file_write_atomic((dir_ / "linearization.json").string(), other.dump()).ok());
  auto wrong_rank = model_load(dir_.string());
  ASSERT_FALSE(wrong_rank.ok());
  EXPECT_NE(wrong_rank.error().find("lora"), std::string::npos) << wrong_rank.error();
  other["lora"]["rank"] = 4;
  other["lora"]["targets"] = Json({"q", "x"});
  ASSERT_TRUE(file_write_atomic((dir_ / "linearization.json").string(), other.dump()).ok());
  auto bad_target = model_load(dir_.string());
  ASSERT_FALSE(bad_target.ok());
  EXPECT_NE(bad_target.error().find("'q,x'"), std::string::npos) << bad_target.error();
}

TEST(LoraOptions, BadOptionsAreRefused) {
  EXPECT_FALSE(lora_options_validate(rank(0)).ok());
  EXPECT_FALSE(lora_options_validate(rank(65)).ok());
  LoraOptions no_alpha = rank(4);
  no_alpha.alpha = 0.0f;
  EXPECT_FALSE(lora_options_validate(no_alpha).ok());
  LoraOptions none = rank(4);
  none.targets = {false, false, false, false};
  EXPECT_FALSE(lora_options_validate(none).ok());
  EXPECT_TRUE(lora_options_validate(rank(16)).ok());
  for (const char* bad : {"", "q,", "q,x", "q,q", "qk", ",v"})
    EXPECT_FALSE(lora_targets_parse(bad).ok()) << bad;
  auto qv = lora_targets_parse("v,q");
  ASSERT_TRUE(qv.ok());
  EXPECT_EQ(*qv, (std::array<bool, kLoraTargets>{true, false, true, false}));
  EXPECT_FLOAT_EQ(rank(8).scale(), 1.0f);        // default alpha = r
  EXPECT_FLOAT_EQ(rank(8, 16.0f).scale(), 2.0f);  // PEFT: alpha / r
}

}  // namespace
}  // namespace golinear
