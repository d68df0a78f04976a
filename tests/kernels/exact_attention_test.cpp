// The scalar-generic exact-branch kernels (exact_attention.h, short_conv.h): in fp32 they equal
// the fp32 kernels of rope.h and attention.h; their backwards pass fp64 finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/exact_attention.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/short_conv.h"

namespace golinear::kernels::cpu {
namespace {

using test::max_abs_diff;
using test::random_vector;

std::vector<float> inv_freq_for(int D) {
  std::vector<float> f(D / 2);
  for (int i = 0; i < D / 2; ++i) f[i] = std::pow(10000.0f, -2.0f * i / D);
  return f;
}

TEST(RopeGeneric, Fp32EqualsRopeForwardAndBackward) {
  const int T = 9, N = 3, D = 8;
  const auto freq = inv_freq_for(D);
  auto x = random_vector<float>((size_t)T * N * D, 1);
  auto a = x, b = x;
  rope_forward(a.data(), freq.data(), T, N, D, 5);
  rope_rotate_generic(b.data(), freq.data(), T, N, D, 5, 1);
  EXPECT_EQ(a, b);
  rope_backward(a.data(), freq.data(), T, N, D, 5);
  rope_rotate_generic(b.data(), freq.data(), T, N, D, 5, -1);
  EXPECT_EQ(a, b);
  EXPECT_LE(max_abs_diff(a, x), 1e-6);  // rotation back
}

struct MaskCase {
  int sinks, window;
};

class AttentionGeneric : public ::testing::TestWithParam<MaskCase> {};

TEST_P(AttentionGeneric, Fp32EqualsAttentionKernels) {
  const auto [s, w] = GetParam();
  const int T = 23, H = 4, G = 2, D = 8;
  const AttentionMask mask{s, w};
  auto q = random_vector<float>((size_t)T * H * D, 2), k = random_vector<float>((size_t)T * G * D, 3),
       v = random_vector<float>((size_t)T * G * D, 4), dy = random_vector<float>((size_t)T * H * D, 5);
  std::vector<float> y1(q.size()), y2(q.size());
  attention_forward(y1.data(), q.data(), k.data(), v.data(), T, T, 0, H, G, D, mask);
  attention_forward_generic(y2.data(), q.data(), k.data(), v.data(), T, T, 0, H, G, D, mask);
  EXPECT_LE(max_abs_diff(y1, y2), 1e-6);
  std::vector<float> dq1(q.size()), dk1(k.size()), dv1(v.size()), dq2(q.size()), dk2(k.size()),
      dv2(v.size());
  attention_backward(dq1.data(), dk1.data(), dv1.data(), dy.data(), q.data(), k.data(), v.data(), T,
                     H, G, D, mask);
  attention_backward_generic(dq2.data(), dk2.data(), dv2.data(), dy.data(), q.data(), k.data(),
                             v.data(), T, H, G, D, mask);
  EXPECT_LE(max_abs_diff(dq1, dq2), 1e-5);
  EXPECT_LE(max_abs_diff(dk1, dk2), 1e-5);
  EXPECT_LE(max_abs_diff(dv1, dv2), 1e-5);
}

TEST_P(AttentionGeneric, BackwardMatchesFiniteDifferencesFp64) {
  const auto [s, w] = GetParam();
  const int T = 12, H = 4, G = 2, D = 4;
  const AttentionMask mask{s, w};
  auto q = random_vector<double>((size_t)T * H * D, 6), k = random_vector<double>((size_t)T * G * D, 7),
       v = random_vector<double>((size_t)T * G * D, 8);
  const auto r = random_vector<double>((size_t)T * H * D, 9);
  auto loss = [&] {
    std::vector<double> y(q.size());
    attention_forward_generic(y.data(), q.data(), k.data(), v.data(), T, T, 0, H, G, D, mask);
    return test::dot_all(y, r);
  };
  std::vector<double> dq(q.size()), dk(k.size()), dv(v.size());
  attention_backward_generic(dq.data(), dk.data(), dv.data(), r.data(), q.data(), k.data(),
                             v.data(), T, H, G, D, mask);
  EXPECT_LE(test::finite_difference_ratio(q, dq, loss), 1.0);
  EXPECT_LE(test::finite_difference_ratio(k, dk, loss), 1.0);
  EXPECT_LE(test::finite_difference_ratio(v, dv, loss), 1.0);
}

// The optional log-sum-exp output (lse = log Σ_{j allowed} exp(q·k_j/√D), checked against a
// direct sum) and its gradient: loss = Σ y·r + Σ lse·r_lse, fp64 finite differences of q, k, v;
// then the blocked fp32 kernels (lse and dlse) against the generic ones.
TEST_P(AttentionGeneric, LseAndItsGradient) {
  const auto [s, w] = GetParam();
  const int T = 12, H = 4, G = 2, D = 4, group = H / G;
  const AttentionMask mask{s, w};
  auto q = random_vector<double>((size_t)T * H * D, 16), k = random_vector<double>((size_t)T * G * D, 17),
       v = random_vector<double>((size_t)T * G * D, 18);
  const auto r = random_vector<double>((size_t)T * H * D, 19);
  const auto r_lse = random_vector<double>((size_t)T * H, 20);
  std::vector<double> y(q.size()), lse((size_t)T * H, -99.0);
  attention_forward_generic(y.data(), q.data(), k.data(), v.data(), T, T, 0, H, G, D, mask,
                            lse.data());
  double worst = 0;
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      double z = 0;
      for (int j = 0; j <= t; ++j) {
        if (!mask.allows(t, j)) continue;
        double sc = 0;
        for (int d = 0; d < D; ++d) sc += q[((size_t)t * H + h) * D + d] * k[((size_t)j * G + h / group) * D + d];
        z += std::exp(sc / std::sqrt((double)D));
      }
      worst = std::max(worst, std::abs(std::log(z) - lse[(size_t)t * H + h]));
    }
  EXPECT_LE(worst, 1e-12);

  auto loss = [&] {
    std::vector<double> yy(q.size()), ll((size_t)T * H);
    attention_forward_generic(yy.data(), q.data(), k.data(), v.data(), T, T, 0, H, G, D, mask,
                              ll.data());
    return test::dot_all(yy, r) + test::dot_all(ll, r_lse);
  };
  std::vector<double> dq(q.size()), dk(k.size()), dv(v.size());
  attention_backward_generic(dq.data(), dk.data(), dv.data(), r.data(), q.data(), k.data(),
                             v.data(), T, H, G, D, mask, r_lse.data());
  EXPECT_LE(test::finite_difference_ratio(q, dq, loss), 1.0);
  EXPECT_LE(test::finite_difference_ratio(k, dk, loss), 1.0);
  EXPECT_LE(test::finite_difference_ratio(v, dv, loss), 1.0);

  // fp32: blocked vs generic, lse and the backward with dlse.
  const std::vector<float> qf(q.begin(), q.end()), kf(k.begin(), k.end()), vf(v.begin(), v.end()),
      rf(r.begin(), r.end()), rlf(r_lse.begin(), r_lse.end());
  std::vector<float> y1(qf.size()), y2(qf.size()), l1(lse.size(), -99.0f), l2(lse.size(), -99.0f);
  attention_forward(y1.data(), qf.data(), kf.data(), vf.data(), T, T, 0, H, G, D, mask, l1.data());
  attention_forward_generic(y2.data(), qf.data(), kf.data(), vf.data(), T, T, 0, H, G, D, mask,
                            l2.data());
  EXPECT_LE(max_abs_diff(l1, l2), 1e-5);
  EXPECT_LE(max_abs_diff(l1, std::vector<float>(lse.begin(), lse.end())), 1e-5);
  std::vector<float> dq1(qf.size()), dk1(kf.size()), dv1(vf.size()), dq2(qf.size()),
      dk2(kf.size()), dv2(vf.size());
  attention_backward(dq1.data(), dk1.data(), dv1.data(), rf.data(), qf.data(), kf.data(), vf.data(),
                     T, H, G, D, mask, rlf.data());
  attention_backward_generic(dq2.data(), dk2.data(), dv2.data(), rf.data(), qf.data(), kf.data(),
                             vf.data(), T, H, G, D, mask, rlf.data());
  EXPECT_LE(max_abs_diff(dq1, dq2), 1e-5);
  EXPECT_LE(max_abs_diff(dk1, dk2), 1e-5);
  EXPECT_LE(max_abs_diff(dv1, dv2), 1e-5);
  EXPECT_LE(max_abs_diff(dq1, std::vector<float>(dq.begin(), dq.end())), 1e-4);
  EXPECT_LE(max_abs_diff(dk1, std::vector<float>(dk.begin(), dk.end())), 1e-4);
}

// Full causal; sinks + window; window only; sinks only; window wider than the sequence.
INSTANTIATE_TEST_SUITE_P(Masks, AttentionGeneric,
                         ::testing::Values(MaskCase{0, -1}, MaskCase{2, 3}, MaskCase{0, 4},
                                           MaskCase{3, 0}, MaskCase{1, 100}));

TEST(ShortConv, IdentityTapsCopyAndBackwardMatchesFiniteDifferencesFp64) {
  const int T = 7, N = 5;
  auto x = random_vector<double>((size_t)T * N, 10);
  std::vector<double> identity((size_t)N * kShortConvWidth, 0.0), y(x.size());
  for (int c = 0; c < N; ++c) identity[c * kShortConvWidth + kShortConvWidth - 1] = 1.0;
  short_conv_forward(y.data(), x.data(), identity.data(), T, N);
  EXPECT_EQ(y, x);

  auto w = random_vector<double>((size_t)N * kShortConvWidth, 11);
  const auto r = random_vector<double>(x.size(), 12);
  auto loss = [&] {
    short_conv_forward(y.data(), x.data(), w.data(), T, N);
    return test::dot_all(y, r);
  };
  std::vector<double> dx(x.size()), dw(w.size());
  short_conv_backward(dx.data(), dw.data(), r.data(), x.data(), w.data(), T, N);
  EXPECT_LE(test::finite_difference_ratio(x, dx, loss), 1.0);
  EXPECT_LE(test::finite_difference_ratio(w, dw, loss), 1.0);
}

}  // namespace
}  // namespace golinear::kernels::cpu
