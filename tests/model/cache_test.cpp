// The per-sequence cache: logits through it must match a full forward.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "io/safetensors.h"
#include "model/linearization.h"
#include "model/transformer.h"

namespace golinear {
namespace {

const std::string kFixtures = std::string(GOLINEAR_TEST_DATA) + "/fixtures/";

std::unique_ptr<Model> load(const std::string& dir) {
  auto model = model_load(dir);
  EXPECT_TRUE(model.ok()) << model.error();
  return model.ok() ? std::move(*model) : nullptr;
}

// The random-llama fixture as the teacher ("teacher") or linearized with mixer `kind` (sinks 2,
// window 3, layer 1 kept full).
std::unique_ptr<Model> load_with_mixers(const std::string& kind) {
  auto model = load(kFixtures + "random-llama");
  if (!model || kind == "teacher") return model;
  mixers::MixerOptions options;
  auto parsed = mixers::mixer_kind_parse(kind);
  EXPECT_TRUE(parsed.ok()) << parsed.error();
  if (!parsed.ok()) return nullptr;
  options.kind = *parsed, options.sinks = 2, options.window = 3;
  auto stack = linearized_mixers(*model, options, /*keep_full=*/{1}, 5);
  EXPECT_TRUE(stack.ok()) << stack.error();
  if (!stack.ok()) return nullptr;
  model->mixers = std::move(*stack);
  return model;
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

// A clone of a SequenceCache after a shared prefix: the clone fed B and the original fed C give
// the logits of full forwards over A+B and A+C (teacher, and a linearized hybrid with one layer
// kept full).
class CacheCloneTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CacheCloneTest, CloneAndOriginalMatchFullForwards) {
  auto model = load_with_mixers(GetParam());
  ASSERT_TRUE(model);
  const int V = model->config.vocab_size, A = 17, nb = 6, nc = 9;
  std::vector<int32_t> ab(A + nb), ac(A + nc);
  for (int t = 0; t < A + nb; ++t) ab[t] = (t * 7919 + 3) % V;
  for (int t = 0; t < A + nc; ++t) ac[t] = t < A ? ab[t] : (t * 104729 + 11) % V;
  std::vector<float> full_b((long)(A + nb) * V), full_c((long)(A + nc) * V);
  model_forward(*model, ab.data(), A + nb, full_b.data());
  model_forward(*model, ac.data(), A + nc, full_c.data());

  SequenceCache original = model_new_cache(*model);
  std::vector<float> last(V);
  model_forward_cached(*model, original, ab.data(), A, last.data(), /*last_only=*/true);
  SequenceCache copy = original.clone();
  EXPECT_EQ(copy.position, A);
  EXPECT_EQ(copy.bytes(), original.bytes());
  ASSERT_EQ(copy.layers.size(), original.layers.size());
  std::vector<float> rows_c((long)nc * V), rows_b((long)nb * V);
  model_forward_cached(*model, original, ac.data() + A, nc, rows_c.data(), /*last_only=*/false);
  model_forward_cached(*model, copy, ab.data() + A, nb, rows_b.data(), /*last_only=*/false);
  for (long i = 0; i < (long)nb * V; ++i)
    ASSERT_NEAR(rows_b[i], full_b[(long)A * V + i], 1e-4f) << "clone, token " << A + i / V;
  for (long i = 0; i < (long)nc * V; ++i)
    ASSERT_NEAR(rows_c[i], full_c[(long)A * V + i], 1e-4f) << "original, token " << A + i / V;
  EXPECT_EQ(copy.position, A + nb);
  EXPECT_EQ(original.position, A + nc);
}

INSTANTIATE_TEST_SUITE_P(Mixers, CacheCloneTest, ::testing::Values("teacher", "gdn", "hedgehog"));

// One decode step over B sequences of different lengths (model_decode_batch) gives each the
// logits model_forward_cached gives it alone, bit for bit, and advances every cache by one
// (teacher, and a linearized hybrid with one layer kept full).
class DecodeBatchTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DecodeBatchTest, EachRowEqualsItsSequenceAlone) {
  auto model = load_with_mixers(GetParam());
  ASSERT_TRUE(model);
  const int V = model->config.vocab_size, B = 7;  // two groups of kDecodeBatchRows rows
  std::vector<SequenceCache> batched, alone;
  std::vector<int32_t> next(B);
  std::vector<float> last(V);
  for (int b = 0; b < B; ++b) {
    std::vector<int32_t> prompt(3 + 2 * b);
    for (size_t t = 0; t < prompt.size(); ++t) prompt[t] = (int32_t)((t * 7919 + 13 * b + 3) % V);
    batched.push_back(model_new_cache(*model));
    model_forward_cached(*model, batched.back(), prompt.data(), (int)prompt.size(), last.data());
    alone.push_back(batched.back().clone());
    next[b] = (b * 104729 + 11) % V;
  }
  std::vector<SequenceCache*> caches;
  for (auto& c : batched) caches.push_back(&c);
  for (int step = 0; step < 3; ++step) {
    std::vector<float> logits((long)B * V), expected(V);
    model_decode_batch(*model, caches.data(), next.data(), B, logits.data());
    for (int b = 0; b < B; ++b) {
      model_forward_cached(*model, alone[b], &next[b], 1, expected.data());
      for (int i = 0; i < V; ++i)
        ASSERT_EQ(logits[(long)b * V + i], expected[i]) << "step " << step << " row " << b;
      EXPECT_EQ(batched[b].position, alone[b].position);
      next[b] = (next[b] * 31 + 7) % V;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Mixers, DecodeBatchTest, ::testing::Values("teacher", "gdn", "gla"));

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
            std::string::npos)
      << missing.error();

  for (auto& t : tensors)
    if (t.name == "model.norm.weight") t.shape = {t.shape[0] / 2, 2};
  ASSERT_TRUE(safetensors_write((dir / "model.safetensors").string(), tensors).ok());
  auto misshapen = model_load(dir.string());
  ASSERT_FALSE(misshapen.ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace golinear
