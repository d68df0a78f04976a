// Generation through the per-sequence cache must match a full forward at every step.
#include <gtest/gtest.h>

#include <cmath>

#include "model/transformer.h"
#include "runtime/generate.h"

namespace golinear {
namespace {

const std::string kFixtures = std::string(GOLINEAR_TEST_DATA) + "/fixtures/";

class GenerateTest : public ::testing::TestWithParam<std::string> {};

// Greedy decoding through the cache: at every step the chosen token is the argmax of a full
// forward over everything so far.
TEST_P(GenerateTest, GreedyGenerationEqualsArgmaxOfFullForward) {
  auto loaded = model_load(GetParam());
  ASSERT_TRUE(loaded.ok()) << loaded.error();
  const Model& model = **loaded;
  const int V = model.config.vocab_size;
  std::vector<int32_t> prompt = {0, 17, 230, 4001, 12, 999, 5};
  runtime::GenerateOptions options;
  options.max_new_tokens = 12;
  std::vector<int32_t> generated = runtime::generate(model, prompt, options);
  ASSERT_EQ(generated.size(), 12u);
  std::vector<int32_t> sequence = prompt;
  for (int32_t token : generated) {
    std::vector<float> logits(V);
    model_forward(model, sequence.data(), (int)sequence.size(), logits.data(), true);
    EXPECT_EQ(token, runtime::argmax(logits.data(), V)) << "at length " << sequence.size();
    sequence.push_back(token);
  }
}

TEST(Sampler, SameSeedSameChoicesAndTopPRestricts) {
  std::vector<float> logits = {2.0f, 1.0f, 0.5f, -1.0f, 3.0f};
  runtime::Sampler a({1.0f, 1.0f, 42}), b({1.0f, 1.0f, 42});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.sample(logits.data(), 5), b.sample(logits.data(), 5));
  // top_p small enough keeps only the most likely token.
  runtime::Sampler nucleus({1.0f, 0.01f, 7});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(nucleus.sample(logits.data(), 5), 4);
  runtime::Sampler greedy({0.0f, 1.0f, 7});
  EXPECT_EQ(greedy.sample(logits.data(), 5), 4);
}

// top-k keeps the k most likely, min-p those at least min_p times the most likely; what is kept
// is drawn in proportion to its probability.
TEST(Sampler, TopKAndMinPRestrictAndKeepProportions) {
  std::vector<float> logits = {2.0f, 1.0f, 0.5f, -1.0f, 3.0f};
  const double p4 = std::exp(3.0) / (std::exp(3.0) + std::exp(2.0));  // among {4, 0}
  for (auto options : {runtime::SamplerOptions{1.0f, 1.0f, 3, 2, 0.0f},
                       runtime::SamplerOptions{1.0f, 1.0f, 3, 0, 0.2f}}) {
    runtime::Sampler sampler(options);
    int count4 = 0, count0 = 0;
    const int n = 4000;
    for (int i = 0; i < n; ++i) {
      const int32_t id = sampler.sample(logits.data(), 5);
      ASSERT_TRUE(id == 4 || id == 0) << id;
      (id == 4 ? count4 : count0)++;
    }
    EXPECT_NEAR((double)count4 / n, p4, 0.03);
    EXPECT_GT(count0, 0);
  }
  // min_p 0.1 lets token 1 (e^1/e^3 = 0.135) in, not token 2 (0.082).
  runtime::Sampler min_p({1.0f, 1.0f, 5, 0, 0.1f});
  bool saw1 = false;
  for (int i = 0; i < 4000; ++i) {
    const int32_t id = min_p.sample(logits.data(), 5);
    ASSERT_NE(id, 2);
    ASSERT_NE(id, 3);
    saw1 = saw1 || id == 1;
  }
  EXPECT_TRUE(saw1);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GenerateTest,
                         ::testing::Values(kFixtures + "random-llama", kFixtures + "random-qwen2",
                                           kFixtures + "random-qwen3",
                                           std::string(GOLINEAR_MODEL_DIR) + "/tiny-llama3-25m"));

}  // namespace
}  // namespace golinear
