// The context limit of a model: max_position_embeddings with a softmax layer, memory otherwise.
#include <gtest/gtest.h>

#include "model/context_limit.h"

namespace golinear {
namespace {

const std::string kFixtures = std::string(GOLINEAR_TEST_DATA) + "/fixtures/";

TEST(ContextLimit, SoftmaxLayersKeepTheTrainedPositionsLinearModelsTheMemory) {
  auto config = model_config_read(kFixtures + "random-llama/config.json");
  ASSERT_TRUE(config.ok()) << config.error();
  // V 8192, C 64, (H + 2G)·D = 128, F 160: 4·(8192 + 4·64 + 2·128 + 3·160) bytes.
  EXPECT_EQ(context_bytes_per_token(*config), 4L * (8192 + 256 + 256 + 480));
  const size_t gib = 1UL << 30;
  EXPECT_EQ(context_limit(*config, {}, gib).tokens, 4096);
  EXPECT_EQ(context_limit(*config, {"gdn", "softmax"}, gib).tokens, 4096);
  EXPECT_NE(context_limit(*config, {"gdn", "softmax"}, gib).reason.find("max_position_embeddings"),
            std::string::npos);
  const ContextLimit linear = context_limit(*config, {"gdn", "gdn"}, gib);
  EXPECT_EQ(linear.tokens, (long)gib / context_bytes_per_token(*config));
  EXPECT_GT(linear.tokens, 4096);
  EXPECT_NE(linear.reason.find("every layer is linear"), std::string::npos);
  EXPECT_EQ(context_limit(*config, {"none", "none"}, 1UL << 50).tokens, 1L << 30);
  EXPECT_EQ(context_limit(*config, {"gla", "gla"}, 10).tokens, 2);  // never below 2 tokens
  // A base directory (no linearization.json) reads as softmax.
  auto read = context_limit_read(kFixtures + "random-llama", gib);
  ASSERT_TRUE(read.ok()) << read.error();
  EXPECT_EQ(read->tokens, 4096);
}

}  // namespace
}  // namespace golinear
