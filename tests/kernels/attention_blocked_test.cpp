// The blocked fp32 attention (attention_forward, attention_backward: sgemm blocks and a polynomial
// exp) against the one-query-at-a-time references, evaluated in fp64 (attention_*_generic<double>)
// so that the comparison measures the fast path's fp32 rounding alone.
//
// Tolerances: outputs are convex combinations of O(1) values and gradients O(1) sums over ≤ T keys;
// fp32 products round at ~1e-7 relative and the polynomial exp is within 2 ulp, so the normalized
// MSE stays ≤ 1e-11 and the max-abs error ≤ 1e-5 of the scale. We allow nmse ≤ 1e-9 and
// max-abs ≤ 2e-5·max(1, max|ref|).
#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/exact_attention.h"

namespace golinear::kernels::cpu {
namespace {

using test::max_abs;
using test::max_abs_diff;
using test::random_vector;
using test::nmse;

template <class A, class B>
void expect_close(const A& fast, const B& ref, const std::string& what) {
  ASSERT_TRUE(test::all_finite(fast)) << what;
  EXPECT_LE(nmse(fast, ref), 1e-9) << what;
  EXPECT_LE(max_abs_diff(fast, ref), 2e-5 * std::max(1.0, max_abs(ref))) << what;
}

std::vector<double> to_double(const std::vector<float>& x) { return {x.begin(), x.end()}; }

struct Case {
  int T, H, G, D;
  AttentionMask mask;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << "T=" << c.T << " H=" << c.H << " G=" << c.G << " D=" << c.D << " sinks=" << c.mask.sinks
      << " window=" << c.mask.window;
}

class AttentionBlocked : public ::testing::TestWithParam<Case> {};

// Scores scaled up (×3) so that the softmax is peaked, as in trained models.
TEST_P(AttentionBlocked, ForwardEqualsReference) {
  const Case c = GetParam();
  const auto q = random_vector<float>((size_t)c.T * c.H * c.D, 1, -3, 3);
  const auto k = random_vector<float>((size_t)c.T * c.G * c.D, 2);
  const auto v = random_vector<float>((size_t)c.T * c.G * c.D, 3);
  std::vector<double> ref((size_t)c.T * c.H * c.D);
  attention_forward_generic<double>(ref.data(), to_double(q).data(), to_double(k).data(),
                                    to_double(v).data(), c.T, c.T, 0, c.H, c.G, c.D, c.mask);
  std::vector<float> y(ref.size(), -99.0f);
  attention_forward(y.data(), q.data(), k.data(), v.data(), c.T, c.T, 0, c.H, c.G, c.D, c.mask);
  expect_close(y, ref, "y");
  // A block of queries at a later position against a longer key cache (decode/prefill of a suffix).
  const int Tq = std::max(1, c.T / 3), pos0 = c.T - Tq;
  std::vector<double> ref_tail((size_t)Tq * c.H * c.D);
  attention_forward_generic<double>(ref_tail.data(), to_double(q).data() + (long)pos0 * c.H * c.D,
                                    to_double(k).data(), to_double(v).data(), Tq, c.T, pos0, c.H,
                                    c.G, c.D, c.mask);
  std::vector<float> y_tail(ref_tail.size());
  attention_forward(y_tail.data(), q.data() + (long)pos0 * c.H * c.D, k.data(), v.data(), Tq,
                    c.T, pos0, c.H, c.G, c.D, c.mask);
  expect_close(y_tail, ref_tail, "y at pos0");
  // The fp32 reference agrees too.
  std::vector<float> y_ref32(ref.size());
  attention_forward_reference(y_ref32.data(), q.data(), k.data(), v.data(), c.T, c.T, 0, c.H, c.G,
                              c.D, c.mask);
  expect_close(y, y_ref32, "y vs fp32 reference");
}

TEST_P(AttentionBlocked, BackwardEqualsReference) {
  const Case c = GetParam();
  const auto q = random_vector<float>((size_t)c.T * c.H * c.D, 4, -3, 3);
  const auto k = random_vector<float>((size_t)c.T * c.G * c.D, 5);
  const auto v = random_vector<float>((size_t)c.T * c.G * c.D, 6);
  const auto dy = random_vector<float>((size_t)c.T * c.H * c.D, 7);
  std::vector<double> dq(q.size()), dk(k.size()), dv(v.size());
  attention_backward_generic<double>(dq.data(), dk.data(), dv.data(), to_double(dy).data(),
                                     to_double(q).data(), to_double(k).data(),
                                     to_double(v).data(), c.T, c.H, c.G, c.D, c.mask);
  std::vector<float> fq(q.size()), fk(k.size()), fv(v.size());
  attention_backward(fq.data(), fk.data(), fv.data(), dy.data(), q.data(), k.data(), v.data(),
                     c.T, c.H, c.G, c.D, c.mask);
  expect_close(fq, dq, "dq");
  expect_close(fk, dk, "dk");
  expect_close(fv, dv, "dv");
}

// Full causal, sinks + window (the hybrid's default 8 + 56 and odd sizes), window only, sinks only;
// lengths below, at and across the 64-query block.
INSTANTIATE_TEST_SUITE_P(
    Masks, AttentionBlocked,
    ::testing::Values(Case{1, 2, 1, 8, {}}, Case{37, 4, 2, 8, {}}, Case{64, 4, 2, 16, {}},
                      Case{200, 4, 2, 16, {}}, Case{300, 8, 2, 64, {}},
                      Case{300, 8, 2, 64, {8, 56}}, Case{150, 4, 2, 8, {3, 5}},
                      Case{130, 4, 4, 8, {0, 20}}, Case{130, 4, 2, 8, {4, 0}},
                      Case{100, 4, 2, 8, {200, 10}}));

}  // namespace
}  // namespace golinear::kernels::cpu
