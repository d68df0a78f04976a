// Finite-difference checks in fp64 of hybrid_backward: every parameter and every input (x, q, k,
// v), for every state kind and mixing, with small shapes (C=16, H=4, G=2, D=8, T=20, s=2, w=3:
// sinks, window, delayed state and early tokens with an empty state are all exercised) and random
// parameters. Then the fp32 Mixer::backward against the fp64 gradients.
#include <gtest/gtest.h>

#include <algorithm>

#include "mixer_test_util.h"
#include "mixers/hybrid_mixer.h"

namespace golinear::mixers {
namespace {

const AttentionShape kShape{16, 4, 2, 8};
constexpr int kT = 20;

struct GradientCase {
  MixerKind kind;
  MixKind mix;
  int sinks = 2, window = 3;
  bool conv = true, linear_rope = false;
};

std::string case_name(const ::testing::TestParamInfo<GradientCase>& info) {
  const GradientCase& c = info.param;
  std::string mix = to_string(c.mix);
  std::replace(mix.begin(), mix.end(), '-', '_');
  return to_string(c.kind) + "_" + mix + "_s" + std::to_string(c.sinks) + "_w" +
         std::to_string(c.window) + (c.conv ? "_conv" : "") + (c.linear_rope ? "_rope" : "");
}

void PrintTo(const GradientCase& c, std::ostream* os) {
  *os << to_string(c.kind) << " mix=" << to_string(c.mix) << " s=" << c.sinks << " w=" << c.window
      << " conv=" << c.conv << " linear_rope=" << c.linear_rope;
}

MixerOptions options_of(const GradientCase& c) {
  MixerOptions o;
  o.kind = c.kind, o.mix = c.mix, o.sinks = c.sinks, o.window = c.window, o.conv = c.conv;
  o.linear_rope = c.linear_rope;
  return o;
}

// Central differences with ε = 1e-6 in fp64: truncation ~ε², rounding ~1e-16/ε ≈ 1e-10, so
// |analytic − numeric| ≤ 1e-7 + 1e-5·|g| leaves a wide margin either way.
double worst_ratio(std::vector<double>& x, const std::vector<double>& analytic,
                   const std::function<double()>& loss) {
  return kernels::test::finite_difference_ratio(x, analytic, loss, 1e-6, 1e-7, 1e-5);
}

class HybridGradients : public ::testing::TestWithParam<GradientCase> {};

TEST_P(HybridGradients, BackwardMatchesFiniteDifferencesFp64) {
  const MixerOptions options = options_of(GetParam());
  auto mixer = test::make_hybrid(options, kShape);
  test::randomize_parameters(*mixer, 21);
  test::DoubleParameters params(*mixer);
  test::SequenceInputs<double> in(kShape, kT, 22);
  const auto r = test::random_normal<double>((size_t)kT * kShape.H * kShape.D, 23);  // = dy

  auto loss = [&] {
    std::vector<double> y(r.size());
    hybrid_forward<double>(options, kShape, params.view(), in.hybrid_inputs(), y.data());
    double acc = 0;
    for (size_t i = 0; i < y.size(); ++i) acc += y[i] * r[i];
    return acc;
  };
  std::vector<double> dx(in.x.size()), dq(in.q.size()), dk(in.k.size()), dv(in.v.size());
  hybrid_backward<double>(options, kShape, params.view(), params.grad_view(), in.hybrid_inputs(),
                          r.data(), HybridInputGrads<double>{dx.data(), dq.data(), dk.data(), dv.data()});

  EXPECT_LE(worst_ratio(in.x, dx, loss), 1.0) << "x";
  EXPECT_LE(worst_ratio(in.q, dq, loss), 1.0) << "q";
  EXPECT_LE(worst_ratio(in.k, dk, loss), 1.0) << "k";
  EXPECT_LE(worst_ratio(in.v, dv, loss), 1.0) << "v";
  for (size_t i = 0; i < params.names.size(); ++i) {
    EXPECT_GT(test::max_abs(params.grads[i]), 0.0) << params.names[i] << " gets no gradient";
    EXPECT_LE(worst_ratio(params.values[i], params.grads[i], loss), 1.0) << params.names[i];
  }

  // The fp32 Mixer::backward agrees with the fp64 gradients (fp32 tolerance, relative to scale).
  test::SequenceInputs<float> inf(kShape, kT, 22);
  const std::vector<float> rf(r.begin(), r.end());
  std::vector<float> fx(dx.size()), fq(dq.size()), fk(dk.size()), fv(dv.size());
  mixer->backward(inf.mixer_inputs(), rf.data(),
                  MixerInputGrads{fx.data(), fq.data(), fk.data(), fv.data()});
  auto close = [](const auto& a, const auto& b) {
    return test::max_abs_diff(a, b) <= 1e-3 * std::max(1.0, test::max_abs(b));
  };
  EXPECT_TRUE(close(fx, dx));
  EXPECT_TRUE(close(fq, dq));
  EXPECT_TRUE(close(fk, dk));
  EXPECT_TRUE(close(fv, dv));
  const auto fp = mixer->parameters();
  for (size_t i = 0; i < fp.size(); ++i) EXPECT_TRUE(close(fp[i]->grad, params.grads[i])) << fp[i]->name;
}

INSTANTIATE_TEST_SUITE_P(
    Recipes, HybridGradients,
    ::testing::Values(GradientCase{MixerKind::gdn, MixKind::gate},
                      GradientCase{MixerKind::gdn, MixKind::add},
                      GradientCase{MixerKind::gdn, MixKind::scale},
                      GradientCase{MixerKind::gdn, MixKind::gate, 2, 3, true, true},
                      GradientCase{MixerKind::gdn, MixKind::gate, 0, 0},
                      GradientCase{MixerKind::gdn, MixKind::gate, 2, 0, false},
                      GradientCase{MixerKind::gla, MixKind::gate},
                      GradientCase{MixerKind::gla, MixKind::scale, 0, 0},
                      GradientCase{MixerKind::kgla, MixKind::gate},
                      GradientCase{MixerKind::kgla, MixKind::add, 0, 3, false},
                      GradientCase{MixerKind::hedgehog, MixKind::gate},
                      GradientCase{MixerKind::hedgehog, MixKind::scale, 0, 0, true, true},
                      GradientCase{MixerKind::none, MixKind::gate},
                      GradientCase{MixerKind::gdn, MixKind::gate_lse},
                      GradientCase{MixerKind::gdn, MixKind::gate_lse, 2, 3, true, true},
                      GradientCase{MixerKind::gdn, MixKind::gate_lse, 2, 0, false},
                      GradientCase{MixerKind::gdn, MixKind::gate_lse, 0, 3, false},
                      GradientCase{MixerKind::gla, MixKind::gate_lse},
                      GradientCase{MixerKind::hedgehog, MixKind::gate_lse},
                      GradientCase{MixerKind::gdn, MixKind::split},
                      GradientCase{MixerKind::gdn, MixKind::split, 2, 3, true, true},
                      GradientCase{MixerKind::gdn, MixKind::split, 2, 0, false},
                      GradientCase{MixerKind::gdn, MixKind::split, 0, 3, false},
                      GradientCase{MixerKind::gla, MixKind::split}),
    case_name);

}  // namespace
}  // namespace golinear::mixers
