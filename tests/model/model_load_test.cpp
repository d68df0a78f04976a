// model_load's two parts: the whole model, and the model without its backbone weights (what
// the GPU loader starts from: config, RoPE, mixers with their parameters); and a random
// checkpoint (io/random_checkpoint.h) through the normal loader.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/json.h"
#include "io/random_checkpoint.h"
#include "mixers/mixer_factory.h"
#include "model/linearization.h"
#include "model/transformer.h"

namespace golinear {
namespace {

namespace fs = std::filesystem;

const std::string kFixtures = std::string(GOLINEAR_TEST_DATA) + "/fixtures/";

class ModelLoadDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("golinear_model_load_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ModelLoadDir, WithoutBackboneKeepsConfigAndMixersOnly) {
  // A linearized copy of the qwen3 fixture: layer 0 hybrid, layer 1 softmax.
  const fs::path dir = dir_ / "linearized";
  fs::copy(kFixtures + "random-qwen3", dir);
  auto base = model_load(dir.string());
  ASSERT_TRUE(base.ok()) << base.error();
  mixers::MixerOptions options;
  auto stack = linearized_mixers(**base, options, {1}, 5);
  ASSERT_TRUE(stack.ok()) << stack.error();
  (*base)->mixers = std::move(*stack);
  for (mixers::Parameter* p : (*base)->mixers[0]->parameters())
    for (float& x : p->value) x += 0.25f;  // away from the init
  ASSERT_TRUE(linearization_save(**base, linearization_recipe_of(**base, options), dir.string()).ok());

  auto full = model_load(dir.string());
  auto skeleton = model_load(dir.string(), ModelLoadParts::without_backbone);
  ASSERT_TRUE(full.ok()) << full.error();
  ASSERT_TRUE(skeleton.ok()) << skeleton.error();
  EXPECT_TRUE((*full)->has_backbone());
  EXPECT_FALSE((*skeleton)->has_backbone());
  EXPECT_TRUE((*skeleton)->lm_head.empty());
  EXPECT_TRUE((*skeleton)->final_norm.empty());
  ASSERT_EQ((*skeleton)->layers.size(), (*full)->layers.size());
  for (const LayerWeights& w : (*skeleton)->layers) {
    EXPECT_TRUE(w.q_proj.empty());
    EXPECT_TRUE(w.q_norm.empty());
    EXPECT_TRUE(w.down_proj.empty());
  }
  EXPECT_EQ((*skeleton)->config.raw, (*full)->config.raw);
  EXPECT_EQ((*skeleton)->inv_freq, (*full)->inv_freq);
  ASSERT_EQ((*skeleton)->mixers.size(), (*full)->mixers.size());
  for (size_t l = 0; l < (*full)->mixers.size(); ++l) {
    EXPECT_EQ((*skeleton)->mixers[l]->kind(), (*full)->mixers[l]->kind());
    auto a = (*skeleton)->mixers[l]->parameters(), b = (*full)->mixers[l]->parameters();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i]->value, b[i]->value) << a[i]->name;
  }
  EXPECT_EQ((*skeleton)->mixers[0]->kind(), "gdn");
}

TEST_F(ModelLoadDir, WithoutBackboneStillChecksEveryTensor) {
  // The fixture's config with a larger hidden size: every tensor is misshapen.
  const fs::path dir = dir_ / "wrong";
  fs::copy(kFixtures + "random-llama", dir);
  auto config = json_read_file((dir / "config.json").string());
  ASSERT_TRUE(config.ok());
  (*config)["intermediate_size"] = (*config)["intermediate_size"].get<int>() + 2;
  std::ofstream((dir / "config.json").string()) << config->dump();
  auto skeleton = model_load(dir.string(), ModelLoadParts::without_backbone);
  ASSERT_FALSE(skeleton.ok());
  EXPECT_NE(skeleton.error().find("mlp.gate_proj.weight"), std::string::npos) << skeleton.error();
}

TEST_F(ModelLoadDir, RandomCheckpointLoadsAndRuns) {
  for (const std::string fixture : {"random-llama", "random-qwen2", "random-qwen3"}) {
    RandomCheckpointOptions options;
    options.config_path = kFixtures + fixture + "/config.json";
    options.tokenizer = kFixtures + fixture;
    options.out = (dir_ / fixture).string();
    options.max_shard_bytes = 500000;
    auto written = random_checkpoint_write(options);
    ASSERT_TRUE(written.ok()) << written.error();
    auto model = model_load(options.out);
    ASSERT_TRUE(model.ok()) << model.error();
    const int T = 8, V = (*model)->config.vocab_size;
    std::vector<int32_t> ids = {1, 5, 9, 200, 7, 3, 3, 100};
    std::vector<float> logits((size_t)T * V);
    model_forward(**model, ids.data(), T, logits.data());
    for (float x : logits) ASSERT_TRUE(std::isfinite(x)) << fixture;
  }
}

}  // namespace
}  // namespace golinear
