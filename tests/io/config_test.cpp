// config.json parsing: the three families, both spellings of the rope settings, and clear
// errors for what cannot be run.
#include <gtest/gtest.h>

#include <cmath>

#include "io/config.h"

namespace golinear {
namespace {

Json base_config(const std::string& architecture) {
  return Json::parse(R"({"architectures": [")" + architecture + R"("], "vocab_size": 100,
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-5})");
}

TEST(Config, ReadsTheFixtures) {
  const std::string fixtures = std::string(GOLINEAR_TEST_DATA) + "/fixtures/";
  auto qwen3 = model_config_read(fixtures + "random-qwen3/config.json");
  ASSERT_TRUE(qwen3.ok()) << qwen3.error();
  EXPECT_EQ(qwen3->family, ModelFamily::qwen3);
  EXPECT_EQ(qwen3->head_dim, 32);
  EXPECT_TRUE(qwen3->qk_norm);
  EXPECT_FALSE(qwen3->tie_word_embeddings);
  EXPECT_EQ(qwen3->rope.theta, 1e6);
  auto qwen2 = model_config_read(fixtures + "random-qwen2/config.json");
  ASSERT_TRUE(qwen2.ok()) << qwen2.error();
  EXPECT_TRUE(qwen2->qkv_bias);
  auto llama = model_config_read(std::string(GOLINEAR_MODEL_DIR) + "/tiny-llama3-25m/config.json");
  ASSERT_TRUE(llama.ok()) << llama.error();
  EXPECT_EQ(llama->rope.type, "llama3");
  EXPECT_EQ(llama->rope.original_max_position, 2048);
  EXPECT_EQ(model_config_parameter_count(*llama), 25174528);  // meta.json of the fixture
}

TEST(Config, RopeScalingSpelledEitherWay) {
  Json hub = base_config("LlamaForCausalLM");
  hub["rope_theta"] = 500000.0;
  hub["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  auto a = model_config_parse(hub, "hub.json");
  ASSERT_TRUE(a.ok()) << a.error();
  EXPECT_EQ(a->rope.type, "linear");
  EXPECT_EQ(a->rope.theta, 500000.0);
  Json v5 = base_config("LlamaForCausalLM");
  v5["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 4.0}, {"rope_theta", 500000.0}};
  auto b = model_config_parse(v5, "v5.json");
  ASSERT_TRUE(b.ok()) << b.error();
  EXPECT_EQ(b->rope.type, "linear");
  EXPECT_EQ(b->rope.theta, 500000.0);
  auto fa = rope_inverse_frequencies(a->rope, 16), fb = rope_inverse_frequencies(b->rope, 16);
  EXPECT_EQ(fa, fb);
  EXPECT_FLOAT_EQ(fa[0], 0.25f);  // 1/theta^0 scaled by 1/4
}

TEST(Config, Llama3ScalingFollowsTheFormula) {
  RopeConfig rope;
  rope.type = "llama3";
  rope.theta = 500000;
  rope.factor = 8;
  rope.low_freq_factor = 1;
  rope.high_freq_factor = 4;
  rope.original_max_position = 8192;
  RopeConfig plain = rope;
  plain.type = "default";
  auto scaled = rope_inverse_frequencies(rope, 128), base = rope_inverse_frequencies(plain, 128);
  for (size_t i = 0; i < base.size(); ++i) {
    double wavelen = 2 * M_PI / base[i];
    if (wavelen < 8192.0 / 4) EXPECT_EQ(scaled[i], base[i]);
    else if (wavelen > 8192.0) EXPECT_FLOAT_EQ(scaled[i], base[i] / 8);
    else EXPECT_TRUE(scaled[i] < base[i] && scaled[i] > base[i] / 8);
  }
}

TEST(Config, RejectsUnknownArchitecture) {
  auto c = model_config_parse(base_config("MistralForCausalLM"), "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().find("unsupported architecture 'MistralForCausalLM'"), std::string::npos);
}

TEST(Config, RejectsMissingAndMistypedFields) {
  Json missing = base_config("LlamaForCausalLM");
  missing.erase("hidden_size");
  auto a = model_config_parse(missing, "config.json");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error(), "config.json: missing field 'hidden_size'");
  Json mistyped = base_config("LlamaForCausalLM");
  mistyped["num_attention_heads"] = "four";
  auto b = model_config_parse(mistyped, "config.json");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().find("'num_attention_heads' must be an integer"), std::string::npos) << b.error();
  Json gqa = base_config("LlamaForCausalLM");
  gqa["num_key_value_heads"] = 3;
  EXPECT_FALSE(model_config_parse(gqa, "config.json").ok());
  Json rope = base_config("LlamaForCausalLM");
  rope["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 2.0}};
  auto c = model_config_parse(rope, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().find("unsupported rope_type 'yarn'"), std::string::npos);
}

TEST(Config, RejectsMalformedJson) {
  auto parsed = json_parse("{\"vocab_size\": 3,", "config.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().find("config.json: malformed JSON"), std::string::npos);
}

}  // namespace
}  // namespace golinear
