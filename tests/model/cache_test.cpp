// The per-sequence cache: logits through it must match a full forward.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "io/safetensors.h"
#include "model/transformer.h"

namespace golinear {
namespace {

const std::string kFixtures = std::string(GOLINEAR_TEST_DATA) + "/fixtures/";

std::unique_ptr<Model> load(const std::string& dir) {
  auto model = model_load(dir);
  EXPECT_TRUE(model.ok()) << model.error();
  return model.ok() ? std::move(*model) : nullptr;
}

class CacheTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CacheTest, CachedLogitsInPiecesEqualFullForward) {
  auto model = load(GetParam());
  ASSERT_TRUE(model);
  const int V = model->config.vocab_size, T = 40;
  std::vector<int32_t> ids(T);
  for (int t = 0; t < T; ++t) ids[t] = (t * 7919 + 3) % V;
  std::vector<float> full((long)T * V);
  model_forward(*model, ids.data(), T, full.data());
  SequenceCache cache = model_new_cache(*model);
  std::vector<float> piece((long)T * V);
  int t = 0;
  for (int n : {5, 1, 1, 20, 13}) {
    model_forward_cached(*model, cache, &ids[t], n, piece.data(), false);
    for (long i = 0; i < (long)n * V; ++i)
      ASSERT_NEAR(piece[i], full[(long)t * V + i], 1e-4f) << "token " << t + i / V;
    t += n;
  }
  EXPECT_EQ(cache.position, T);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CacheTest,
                         ::testing::Values(kFixtures + "random-llama", kFixtures + "random-qwen2",
                                           kFixtures + "random-qwen3"));

// A checkpoint whose weights lack a tensor or hold one of the wrong shape is refused with the
// tensor's name.
TEST(ModelLoad, NamesMissingOrMisshapenTensor) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("golinear_model_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(kFixtures + "random-llama/config.json", dir / "config.json");
  auto source = SafetensorsFile::open(kFixtures + "random-llama/model.safetensors");
  ASSERT_TRUE(source.ok());
  std::vector<std::vector<float>> values;
  std::vector<TensorToWrite> tensors;
  values.reserve((*source)->tensors().size());
  for (const TensorView& t : (*source)->tensors()) {
    if (t.name == "model.layers.1.mlp.up_proj.weight") continue;
    values.emplace_back(t.numel());
    ASSERT_TRUE(tensor_to_f32(t, values.back().data(), "src").ok());
    tensors.push_back({t.name, t.shape, values.back().data()});
  }
  ASSERT_TRUE(safetensors_write((dir / "model.safetensors").string(), tensors).ok());
  auto missing = model_load(dir.string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("missing tensor 'model.layers.1.mlp.up_proj.weight'"),
            std::string::npos) << missing.error();

  for (auto& t : tensors)
    if (t.name == "model.norm.weight") t.shape = {t.shape[0] / 2, 2};
  ASSERT_TRUE(safetensors_write((dir / "model.safetensors").string(), tensors).ok());
  auto misshapen = model_load(dir.string());
  ASSERT_FALSE(misshapen.ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace golinear
