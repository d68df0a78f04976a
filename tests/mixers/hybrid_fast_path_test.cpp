// The fp32 mixer (fast kernels: blocked GDN forward/backward, blocked GLA forward, blocked
// attention, sgemm projections) against the fp64 mixer (the reference kernels, themselves checked
// by finite differences in hybrid_gradient_test.cpp), at a length that spans several 64-token
// chunks and query blocks, for every state kind.
//
// Tolerance: fp32 rounding (~1e-7 relative per operation) through a few hundred operations per
// output and a state carried over ~4 chunks: normalized MSE ≤ 1e-8 and max-abs ≤ 1e-4 of the scale
// (a wide margin over fp32 rounding; a wrong term is O(1)).
#include <gtest/gtest.h>

#include "mixer_test_util.h"
#include "mixers/hybrid_mixer.h"

namespace golinear::mixers {
namespace {

using test::nmse;

const AttentionShape kShape{32, 4, 2, 16};
constexpr int kT = 300;

template <class A, class B>
void expect_close(const A& fast, const B& ref, const std::string& what) {
  EXPECT_TRUE(std::all_of(fast.begin(), fast.end(), [](auto x) { return std::isfinite((double)x); }))
      << what;
  EXPECT_LE(nmse(fast, ref), 1e-8) << what;
  EXPECT_LE(test::max_abs_diff(fast, ref), 1e-4 * std::max(1.0, test::max_abs(ref))) << what;
}

struct FastCase {
  MixerKind kind;
  MixKind mix = MixKind::gate;
};

class HybridFastPath : public ::testing::TestWithParam<FastCase> {};

TEST_P(HybridFastPath, Fp32ForwardAndBackwardEqualFp64Reference) {
  MixerOptions options;
  options.kind = GetParam().kind;
  options.mix = GetParam().mix;
  options.sinks = 8, options.window = 24;
  auto mixer = test::make_hybrid(options, kShape);
  test::randomize_parameters(*mixer, 31, 0.1);
  test::DoubleParameters params(*mixer);
  test::SequenceInputs<double> in(kShape, kT, 32);
  test::SequenceInputs<float> inf(kShape, kT, 32);
  const auto dy = test::random_normal<double>((size_t)kT * kShape.H * kShape.D, 33);
  const std::vector<float> dyf(dy.begin(), dy.end());

  std::vector<double> y(dy.size());
  hybrid_forward<double>(options, kShape, params.view(), in.hybrid_inputs(), y.data());
  std::vector<float> yf(y.size());
  mixer->forward(inf.mixer_inputs(), yf.data());
  expect_close(yf, y, "y");

  std::vector<double> dx(in.x.size()), dq(in.q.size()), dk(in.k.size()), dv(in.v.size());
  hybrid_backward<double>(options, kShape, params.view(), params.grad_view(), in.hybrid_inputs(),
                          dy.data(), HybridInputGrads<double>{dx.data(), dq.data(), dk.data(), dv.data()});
  std::vector<float> fx(dx.size()), fq(dq.size()), fk(dk.size()), fv(dv.size());
  mixer->backward(inf.mixer_inputs(), dyf.data(),
                  MixerInputGrads{fx.data(), fq.data(), fk.data(), fv.data()});
  expect_close(fx, dx, "dx");
  expect_close(fq, dq, "dq");
  expect_close(fk, dk, "dk");
  expect_close(fv, dv, "dv");
  const auto fp = mixer->parameters();
  for (size_t i = 0; i < fp.size(); ++i) expect_close(fp[i]->grad, params.grads[i], fp[i]->name);
}

INSTANTIATE_TEST_SUITE_P(Kinds, HybridFastPath,
                         ::testing::Values(FastCase{MixerKind::gdn}, FastCase{MixerKind::gla},
                                           FastCase{MixerKind::kgla}, FastCase{MixerKind::hedgehog},
                                           FastCase{MixerKind::none},
                                           FastCase{MixerKind::gdn, MixKind::gate_lse}),
                         [](const auto& info) {
                           return to_string(info.param.kind) +
                                  (info.param.mix == MixKind::gate_lse ? "_gate_lse" : "");
                         });

}  // namespace
}  // namespace golinear::mixers
