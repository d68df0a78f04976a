// gpu_model_load (model/cuda/gpu_model_load.h) against gpu_model_upload of the CPU-loaded model:
// the same device layout from the same checkpoint, so the logits must be identical, bit for bit
// (same bf16 weights, same kernels). Checkpoints written here: an F32 one of test::random_model
// (values that are not bf16, so the host rounding must equal __float2bfloat16's), per family
// (Qwen2's q/k/v biases, Qwen3's q/k norm), tied embeddings, a linearized one (hybrid mixers
// from linearization.safetensors), an adapter of a base, and a sharded bf16 one from
// io/random_checkpoint.h.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/json.h"
#include "io/checkpoint.h"
#include "io/random_checkpoint.h"
#include "io/safetensors.h"
#include "kernels/cuda/cuda_test_util.h"
#include "model/cuda/gpu_model.h"
#include "model/cuda/gpu_model_load.h"
#include "model/cuda/random_models.h"
#include "model/linearization.h"
#include "model/transformer.h"

namespace golinear {
namespace {

namespace fs = std::filesystem;

// The fixtures' configs and tokenizers; GOLINEAR_GPU_FIXTURES points at a carried copy on the GPU
// machine (as in gpu_model_test.cpp).
const std::string kFixtures = std::getenv("GOLINEAR_GPU_FIXTURES")
                                  ? std::string(std::getenv("GOLINEAR_GPU_FIXTURES")) + "/"
                                  : std::string(GOLINEAR_TEST_DATA) + "/fixtures/";

class GpuModelLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("golinear_gpu_load_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The fixture's config.json at the small GPU shape (test::set_small_shape), written to
  // dir_/name.json; `tied` ties the embeddings.
  std::string small_config(const std::string& fixture, bool tied, const std::string& name) {
    auto json = json_read_file(kFixtures + fixture + "/config.json");
    EXPECT_TRUE(json.ok()) << json.error();
    Json j = *json;
    j["hidden_size"] = 256;
    j["num_attention_heads"] = 4;
    j["num_key_value_heads"] = 2;
    j["head_dim"] = 64;
    j["intermediate_size"] = 512;
    j["vocab_size"] = 1024;
    j["num_hidden_layers"] = 2;
    j["tie_word_embeddings"] = tied;
    const std::string path = (dir_ / (name + ".json")).string();
    std::ofstream(path) << j.dump(2);
    return path;
  }

  // A checkpoint directory of `model` (F32, one file) with `config_path` as its config.json.
  std::string write_f32_checkpoint(Model& model, const std::string& config_path,
                                   const std::string& name) {
    const fs::path out = dir_ / name;
    fs::create_directories(out);
    fs::copy_file(config_path, out / "config.json");
    std::vector<TensorToWrite> tensors;
    for (const TensorSpec& t : checkpoint_tensor_specs(model.config))
      tensors.push_back({t.name, t.shape, model_weights_of(model, t)->data()});
    EXPECT_TRUE(safetensors_write((out / "model.safetensors").string(), tensors).ok());
    return out.string();
  }

  fs::path dir_;
};

// Loads `dir` both ways and compares: weight bytes, then logits of a full forward, exactly.
void expect_identical(const std::string& dir, const char* what) {
  auto cpu = model_load(dir);
  ASSERT_TRUE(cpu.ok()) << cpu.error();
  auto uploaded = golinear::model::cuda::gpu_model_upload(**cpu);
  ASSERT_TRUE(uploaded.ok()) << uploaded.error();
  auto skeleton = model_load(dir, ModelLoadParts::without_backbone);
  ASSERT_TRUE(skeleton.ok()) << skeleton.error();
  EXPECT_FALSE((*skeleton)->has_backbone());
  golinear::model::cuda::GpuLoadStats stats;
  auto loaded = golinear::model::cuda::gpu_model_load(dir, **skeleton, &stats);
  ASSERT_TRUE(loaded.ok()) << loaded.error();

  size_t expected_bytes = 0;
  for (const TensorSpec& t : checkpoint_tensor_specs((*cpu)->config)) {
    size_t n = 1;
    for (int64_t d : t.shape) n *= (size_t)d;
    expected_bytes += n * (tensor_role_is_vector(t.role) ? sizeof(float) : 2);
  }
  EXPECT_EQ(stats.bytes_uploaded, expected_bytes) << what;
  EXPECT_GT(stats.peak_staging_bytes, 0u);
  EXPECT_EQ((*loaded)->weight_bytes(), (*uploaded)->weight_bytes()) << what;
  EXPECT_EQ((*loaded)->has_hybrid_layers(), (*uploaded)->has_hybrid_layers()) << what;
  std::printf("  %-28s %zu bytes uploaded, staging peak %zu bytes\n", what, stats.bytes_uploaded,
              stats.peak_staging_bytes);

  const int T = 80, V = (*cpu)->config.vocab_size;
  const auto ids = test::test_tokens(T, V, 5);
  std::vector<float> want((size_t)T * V), got((size_t)T * V);
  ASSERT_TRUE((*uploaded)->forward(ids.data(), T, want.data(), false).ok());
  ASSERT_TRUE((*loaded)->forward(ids.data(), T, got.data(), false).ok());
  size_t differ = 0;
  for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
  EXPECT_EQ(differ, 0u) << what << ": logits differ between gpu_model_load and gpu_model_upload";
}

TEST_F(GpuModelLoad, F32CheckpointsOfEveryFamilyGiveIdenticalLogits) {
  REQUIRE_GPU();
  for (const std::string fixture : {"random-llama", "random-qwen2", "random-qwen3"}) {
    const std::string config_path = small_config(fixture, false, fixture);
    auto config = model_config_read(config_path);
    ASSERT_TRUE(config.ok()) << config.error();
    auto model = test::random_model(*config, 31);
    expect_identical(write_f32_checkpoint(*model, config_path, fixture), fixture.c_str());
  }
}

TEST_F(GpuModelLoad, TiedEmbeddingsAndLinearizedLayers) {
  REQUIRE_GPU();
  const std::string config_path = small_config("random-llama", true, "tied");
  auto config = model_config_read(config_path);
  ASSERT_TRUE(config.ok()) << config.error();
  auto model = test::random_model(*config, 32);
  const std::string tied = write_f32_checkpoint(*model, config_path, "tied");
  expect_identical(tied, "llama tied");

  // Layer 0 hybrid (perturbed parameters), layer 1 kept softmax.
  mixers::MixerOptions recipe;
  model->mixers = test::linearized_stack(*model, {1}, 23, &recipe);
  ASSERT_TRUE(linearization_save(*model, linearization_recipe_of(*model, recipe), tied).ok());
  expect_identical(tied, "llama tied, linearized");
}

// An adapter (linearization files only, naming its base): the backbone comes from the base.
TEST_F(GpuModelLoad, AnAdapterLoadsItsBase) {
  REQUIRE_GPU();
  const std::string config_path = small_config("random-llama", false, "base");
  auto config = model_config_read(config_path);
  ASSERT_TRUE(config.ok()) << config.error();
  auto model = test::random_model(*config, 33);
  const std::string base = write_f32_checkpoint(*model, config_path, "base");
  mixers::MixerOptions options;
  model->mixers = test::linearized_stack(*model, {1}, 24, &options);
  LinearizationRecipe recipe = linearization_recipe_of(*model, options);
  const std::string adapter = (dir_ / "adapter").string();
  auto reference = base_reference_make(base, adapter);
  ASSERT_TRUE(reference.ok()) << reference.error();
  recipe.base = *reference;
  fs::create_directories(adapter);
  ASSERT_TRUE(linearization_save(*model, recipe, adapter).ok());
  ASSERT_FALSE(fs::exists(adapter + "/model.safetensors"));
  expect_identical(adapter, "llama adapter");
}

TEST_F(GpuModelLoad, ShardedBf16RandomCheckpoint) {
  REQUIRE_GPU();
  RandomCheckpointOptions options;
  options.config_path = small_config("random-qwen3", false, "qwen3");
  options.tokenizer = kFixtures + "random-qwen3";
  options.out = (dir_ / "bf16").string();
  options.seed = 3;
  options.max_shard_bytes = 1 << 20;
  auto written = random_checkpoint_write(options);
  ASSERT_TRUE(written.ok()) << written.error();
  ASSERT_GT(written->shards, 1);
  expect_identical(options.out, "qwen3 bf16 sharded");
}

TEST(GpuModelLoadErrors, RefusalsAreOneLine) {
  REQUIRE_GPU();
  auto skeleton = model_load(kFixtures + "random-llama", ModelLoadParts::without_backbone);
  ASSERT_TRUE(skeleton.ok()) << skeleton.error();
  // The fixtures' head_dim (16) has no CUDA kernels: refused before any upload, in one line.
  auto loaded = golinear::model::cuda::gpu_model_load(kFixtures + "random-llama", **skeleton);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.error().find("head_dim"), std::string::npos) << loaded.error();
  // A model loaded without its backbone cannot go through gpu_model_upload.
  auto refused = golinear::model::cuda::gpu_model_upload(**skeleton);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().find("without its backbone"), std::string::npos) << refused.error();
}

}  // namespace
}  // namespace golinear
