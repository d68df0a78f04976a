// Options, parsing, validation and the factory: clear errors for bad options, the parameter set
// of each recipe, a deterministic initialisation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "mixer_test_util.h"
#include "mixers/mixer_factory.h"

namespace golinear::mixers {
namespace {

const AttentionShape kShape{16, 4, 2, 8};

TEST(MixerOptions, ParsesEveryNameAndRoundTrips) {
  for (MixerKind kind : {MixerKind::none, MixerKind::gdn, MixerKind::gla, MixerKind::kgla,
                         MixerKind::hedgehog}) {
    auto parsed = mixer_kind_parse(to_string(kind));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, kind);
  }
  for (MixKind mix : {MixKind::gate, MixKind::add, MixKind::scale, MixKind::gate_lse, MixKind::split}) {
    auto parsed = mix_kind_parse(to_string(mix));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, mix);
  }
}

TEST(MixerOptions, UnknownNamesGiveClearErrors) {
  auto kind = mixer_kind_parse("mamba");
  ASSERT_FALSE(kind.ok());
  EXPECT_NE(kind.error().find("unknown mixer 'mamba'"), std::string::npos) << kind.error();
  EXPECT_NE(kind.error().find("gdn"), std::string::npos) << kind.error();
  auto mix = mix_kind_parse("multiply");
  ASSERT_FALSE(mix.ok());
  EXPECT_NE(mix.error().find("unknown mix 'multiply'"), std::string::npos) << mix.error();
}

TEST(MixerOptions, ValidationRejectsBadValues) {
  EXPECT_TRUE(mixer_options_validate(MixerOptions{}).ok());
  MixerOptions o;
  o.window = -1;
  auto st = mixer_options_validate(o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("window must be >= 0, got -1"), std::string::npos) << st.error();
  o = {};
  o.sinks = -3;
  st = mixer_options_validate(o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("sinks must be >= 0"), std::string::npos) << st.error();
  o = {};
  o.sinks = 100;
  o.window = kMaxExactKeys;
  st = mixer_options_validate(o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("exceed the limit of 4096"), std::string::npos) << st.error();
  o = {};
  o.kind = MixerKind::none;
  o.sinks = o.window = 0;
  st = mixer_options_validate(o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("'none'"), std::string::npos) << st.error();
  // Pure replacement is a valid recipe.
  o.kind = MixerKind::gdn;
  EXPECT_TRUE(mixer_options_validate(o).ok());
}

TEST(MixerFactory, RejectsBadOptionsAndShapes) {
  MixerOptions bad;
  bad.window = -5;
  auto m = mixer_create(bad, kShape, 1);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().find("window"), std::string::npos);
  auto m2 = mixer_create(MixerOptions{}, AttentionShape{16, 4, 3, 8}, 1);
  ASSERT_FALSE(m2.ok());
  EXPECT_NE(m2.error().find("must divide"), std::string::npos) << m2.error();
  auto m3 = mixer_create(MixerOptions{}, AttentionShape{16, 4, 2, 7}, 1);
  ASSERT_FALSE(m3.ok());
  EXPECT_NE(m3.error().find("even"), std::string::npos) << m3.error();
}

std::vector<std::string> parameter_names(const MixerOptions& o) {
  auto m = mixer_create(o, kShape, 1);
  EXPECT_TRUE(m.ok());
  std::vector<std::string> names;
  for (Parameter* p : (*m)->parameters()) names.push_back(p->name);
  return names;
}

TEST(MixerFactory, ParametersOfEachRecipe) {
  using V = std::vector<std::string>;
  MixerOptions o;  // default: gdn, split, conv
  EXPECT_EQ(parameter_names(o), (V{"conv_q", "conv_k", "conv_v", "w_lambda", "b_lambda", "c_lse",
                                   "a_far", "w_a", "w_b", "b_beta", "A_log", "dt_bias"}));
  o.mix = MixKind::gate;
  EXPECT_EQ(parameter_names(o), (V{"conv_q", "conv_k", "conv_v", "w_lambda", "b_lambda", "w_a",
                                   "w_b", "b_beta", "A_log", "dt_bias"}));
  o.conv = false, o.mix = MixKind::scale;
  EXPECT_EQ(parameter_names(o), (V{"gamma", "w_a", "w_b", "b_beta", "A_log", "dt_bias"}));
  o.mix = MixKind::add, o.kind = MixerKind::gla;
  EXPECT_EQ(parameter_names(o), (V{"w_decay_down", "w_decay_up", "b_decay"}));
  o.kind = MixerKind::kgla;
  EXPECT_EQ(parameter_names(o), (V{"w_key_decay", "b_key_decay"}));
  o.kind = MixerKind::hedgehog;
  EXPECT_EQ(parameter_names(o), (V{"w_feature_q", "w_feature_k"}));
  o.kind = MixerKind::none;
  EXPECT_EQ(parameter_names(o), V{});
  o.kind = MixerKind::gdn, o.mix = MixKind::gate, o.sinks = o.window = 0;  // no mixing
  EXPECT_EQ(parameter_names(o), (V{"w_a", "w_b", "b_beta", "A_log", "dt_bias"}));
}

TEST(MixerFactory, InitialisationIsDeterministicAndFollowsTheRecipe) {
  auto a = test::make_hybrid(MixerOptions{}, kShape, 42);
  auto b = test::make_hybrid(MixerOptions{}, kShape, 42);
  auto c = test::make_hybrid(MixerOptions{}, kShape, 43);
  const auto pa = a->parameters(), pb = b->parameters(), pc = c->parameters();
  bool any_differs = false;
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i]->value, pb[i]->value) << pa[i]->name;
    any_differs |= pa[i]->value != pc[i]->value;
    const auto& v = pa[i]->value;
    const std::string& n = pa[i]->name;
    if (n.rfind("conv_", 0) == 0) {
      for (size_t j = 0; j < v.size(); ++j) EXPECT_EQ(v[j], j % 4 == 3 ? 1.0f : 0.0f);
    } else if (n == "b_lambda") {
      for (float x : v) EXPECT_EQ(x, -2.0f);
    } else if (n == "w_lambda") {
      for (float x : v) EXPECT_EQ(x, 0.0f);
    } else if (n == "A_log") {
      for (float x : v) EXPECT_TRUE(x >= 0.0f && x <= std::log(16.0f)) << x;
    } else if (n == "dt_bias") {
      for (float x : v) {
        const double dt = std::log1p(std::exp((double)x));  // softplus(dt_bias)
        EXPECT_TRUE(dt >= 0.99e-3 && dt <= 1.01e-1) << dt;
      }
    }
  }
  EXPECT_TRUE(any_differs);
  for (Parameter* p : pa) EXPECT_EQ(p->grad.size(), p->value.size());
}

}  // namespace
}  // namespace golinear::mixers
