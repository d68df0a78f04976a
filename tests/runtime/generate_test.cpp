// Generation through the per-sequence cache must match a full forward at every step.
#include <gtest/gtest.h>

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

INSTANTIATE_TEST_SUITE_P(Fixtures, GenerateTest,
                         ::testing::Values(kFixtures + "random-llama", kFixtures + "random-qwen2",
                                           kFixtures + "random-qwen3",
                                           std::string(GOLINEAR_MODEL_DIR) + "/tiny-llama3-25m"));

}  // namespace
}  // namespace golinear
