// The fast fp32 forms of the linear-state kernels (gated_delta_blocked_*, gated_linear_blocked_forward)
// against their references: the chunked/recurrent forward and the token-by-token backward, run in
// fp64 so that the comparison measures the fast form's fp32 rounding alone.
//
// Tolerances: outputs and gradients are O(1) sums over ≤ 64 tokens per chunk plus a carried state;
// fp32 BLAS rounds each product at ~1e-7 relative with a different summation order, so the
// normalized MSE (Σ(a−b)² / Σb²) stays near 1e-12..1e-10 and the max-abs error near 1e-6 of the
// output scale. We allow nmse ≤ 1e-9 and max-abs ≤ 2e-5·max(1, max|ref|).
#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "kernels/cpu/gated_delta.h"
#include "kernels/cpu/gated_linear.h"

namespace golinear::kernels::cpu {
namespace {

using test::max_abs;
using test::max_abs_diff;
using test::random_vector;
using test::nmse;

constexpr double kNmseTolerance = 1e-9;
constexpr double kMaxAbsTolerance = 2e-5;

template <class A, class B>
void expect_close(const A& fast, const B& ref, const char* what, int N) {
  ASSERT_TRUE(test::all_finite(fast)) << what << " N=" << N;
  EXPECT_LE(nmse(fast, ref), kNmseTolerance) << what << " N=" << N;
  EXPECT_LE(max_abs_diff(fast, ref), kMaxAbsTolerance * std::max(1.0, max_abs(ref)))
      << what << " N=" << N;
}

template <class To, class From>
std::vector<To> cast(const std::vector<From>& x) {
  return std::vector<To>(x.begin(), x.end());
}

struct Shape {
  int N, H, Dk, Dv;
};

void PrintTo(const Shape& s, std::ostream* os) {
  *os << "N=" << s.N << " H=" << s.H << " Dk=" << s.Dk << " Dv=" << s.Dv;
}

// Unit keys and queries, α ∈ (e^{−0.5}, 1) (stronger than the training decays), β ∈ (0, 1).
struct Inputs {
  std::vector<float> q, k, v, g, beta, dout, init;
  Inputs(const Shape& s, int decay_size, uint64_t seed) {
    q = random_vector<float>((size_t)s.N * s.H * s.Dk, seed);
    k = random_vector<float>((size_t)s.N * s.H * s.Dk, seed + 1);
    v = random_vector<float>((size_t)s.N * s.H * s.Dv, seed + 2);
    test::normalize_rows(q, s.Dk);
    test::normalize_rows(k, s.Dk);
    g = random_vector<float>((size_t)s.N * s.H * decay_size, seed + 3, -0.5, 0.0);
    beta = random_vector<float>((size_t)s.N * s.H, seed + 4, 0.0, 1.0);
    dout = random_vector<float>((size_t)s.N * s.H * s.Dv, seed + 5);
    init = random_vector<float>((size_t)s.H * s.Dk * s.Dv, seed + 6, -0.5, 0.5);
  }
};

class BlockedForms : public ::testing::TestWithParam<Shape> {};

TEST_P(BlockedForms, GatedDeltaForwardEqualsReference) {
  const Shape s = GetParam();
  const Inputs in(s, 1, 700 + s.N);
  const auto qd = cast<double>(in.q), kd = cast<double>(in.k), vd = cast<double>(in.v),
             gd = cast<double>(in.g), bd = cast<double>(in.beta), initd = cast<double>(in.init);
  for (bool with_init : {false, true}) {
    std::vector<double> o_ref((size_t)s.N * s.H * s.Dv), s_ref(in.init.size());
    gated_delta_chunked_forward<double>(o_ref.data(), s_ref.data(), with_init ? initd.data() : nullptr,
                                        qd.data(), kd.data(), vd.data(), gd.data(), bd.data(), s.N,
                                        s.H, s.Dk, s.Dv);
    std::vector<float> o(o_ref.size(), -99.0f), state(in.init.size(), -99.0f);
    gated_delta_blocked_forward(o.data(), state.data(), with_init ? in.init.data() : nullptr,
                                in.q.data(), in.k.data(), in.v.data(), in.g.data(),
                                in.beta.data(), s.N, s.H, s.Dk, s.Dv);
    expect_close(o, o_ref, "o", s.N);
    expect_close(state, s_ref, "state", s.N);
  }
}

// The fast backward against the token-by-token reference backward (itself checked against finite
// differences in linear_state_test.cpp), from zero gradients; then once more to check that it
// accumulates.
TEST_P(BlockedForms, GatedDeltaBackwardEqualsReference) {
  const Shape s = GetParam();
  const Inputs in(s, 1, 800 + s.N);
  const size_t nk = in.q.size(), nv = in.v.size(), nh = in.g.size();
  std::vector<double> dq(nk), dk(nk), dv(nv), dg(nh), db(nh);
  gated_delta_backward<double>(dq.data(), dk.data(), dv.data(), dg.data(), db.data(),
                               cast<double>(in.dout).data(), cast<double>(in.q).data(),
                               cast<double>(in.k).data(), cast<double>(in.v).data(),
                               cast<double>(in.g).data(), cast<double>(in.beta).data(), s.N, s.H,
                               s.Dk, s.Dv);
  std::vector<float> fq(nk), fk(nk), fv(nv), fg(nh), fb(nh);
  auto run = [&] {
    gated_delta_blocked_backward(fq.data(), fk.data(), fv.data(), fg.data(), fb.data(),
                                 in.dout.data(), in.q.data(), in.k.data(), in.v.data(),
                                 in.g.data(), in.beta.data(), s.N, s.H, s.Dk, s.Dv);
  };
  run();
  expect_close(fq, dq, "dq", s.N);
  expect_close(fk, dk, "dk", s.N);
  expect_close(fv, dv, "dv", s.N);
  expect_close(fg, dg, "dg", s.N);
  expect_close(fb, db, "dbeta", s.N);
  const std::vector<float> once = fk;
  run();
  std::vector<float> twice(once.size());
  for (size_t i = 0; i < once.size(); ++i) twice[i] = 2 * once[i];
  // The second run adds its products onto non-zero gradients: equal up to fp32 rounding.
  EXPECT_LE(max_abs_diff(fk, twice), kMaxAbsTolerance * std::max(1.0, max_abs(twice)));
}

// With and without decay (Hedgehog: none; the state then grows like N, hence the scale-relative
// max-abs bound).
TEST_P(BlockedForms, GatedLinearForwardEqualsReference) {
  const Shape s = GetParam();
  const Inputs in(s, s.Dk, 900 + s.N);
  const auto qd = cast<double>(in.q), kd = cast<double>(in.k), vd = cast<double>(in.v),
             gd = cast<double>(in.g), initd = cast<double>(in.init);
  for (bool with_decay : {false, true}) {
    std::vector<double> o_ref((size_t)s.N * s.H * s.Dv), s_ref(in.init.size());
    gated_linear_chunked_forward<double>(o_ref.data(), s_ref.data(), initd.data(), qd.data(),
                                         kd.data(), vd.data(), with_decay ? gd.data() : nullptr,
                                         s.N, s.H, s.Dk, s.Dv);
    std::vector<float> o(o_ref.size(), -99.0f), state(in.init.size(), -99.0f);
    gated_linear_blocked_forward(o.data(), state.data(), in.init.data(), in.q.data(), in.k.data(),
                                 in.v.data(), with_decay ? in.g.data() : nullptr, s.N, s.H, s.Dk,
                                 s.Dv);
    expect_close(o, o_ref, with_decay ? "o (decay)" : "o", s.N);
    expect_close(state, s_ref, with_decay ? "state (decay)" : "state", s.N);
  }
}

// Lengths around the chunk of 64 at a small head, and the training head size.
INSTANTIATE_TEST_SUITE_P(Shapes, BlockedForms,
                         ::testing::Values(Shape{1, 3, 16, 12}, Shape{7, 3, 16, 12},
                                           Shape{63, 3, 16, 12}, Shape{64, 3, 16, 12},
                                           Shape{65, 3, 16, 12}, Shape{100, 3, 16, 12},
                                           Shape{193, 3, 16, 12}, Shape{300, 2, 64, 64}));

}  // namespace
}  // namespace golinear::kernels::cpu
