// The linear-state kernels (gated_delta.h, gated_linear.h): the chunked form against the
// recurrence in fp32, and the backward against central differences in fp64.
#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "kernels/cpu/gated_delta.h"
#include "kernels/cpu/gated_linear.h"

namespace golinear::kernels::cpu {
namespace {

using test::max_abs;
using test::max_abs_diff;
using test::random_vector;

// Inputs of a gated delta rule run: unit keys and queries, α ∈ (0.8, 1), β ∈ (0, 1).
template <class S>
struct DeltaInputs {
  int N, H, Dk, Dv;
  std::vector<S> q, k, v, g, beta;
  DeltaInputs(int N_, int H_, int Dk_, int Dv_, uint64_t seed) : N(N_), H(H_), Dk(Dk_), Dv(Dv_) {
    q = random_vector<S>((size_t)N * H * Dk, seed);
    k = random_vector<S>((size_t)N * H * Dk, seed + 1);
    v = random_vector<S>((size_t)N * H * Dv, seed + 2);
    test::normalize_rows(q, Dk);
    test::normalize_rows(k, Dk);
    g = random_vector<S>((size_t)N * H, seed + 3, std::log(0.8), 0.0);
    beta = random_vector<S>((size_t)N * H, seed + 4, 0.0, 1.0);
  }
};

class GatedDeltaForms : public ::testing::TestWithParam<int> {};

// fp32 tolerance: outputs are O(1) sums over ≤ N tokens of O(1) terms; the two forms round
// differently, ~1e-6 relative per operation.
TEST_P(GatedDeltaForms, ChunkedEqualsRecurrent) {
  const int N = GetParam(), H = 3, Dk = 16, Dv = 12;
  DeltaInputs<float> in(N, H, Dk, Dv, 100 + N);
  std::vector<float> init = random_vector<float>((size_t)H * Dk * Dv, 7, -0.5, 0.5);
  for (const float* state_init : {(const float*)nullptr, (const float*)init.data()}) {
    std::vector<float> o_rec((size_t)N * H * Dv), o_chunk(o_rec.size(), -99.0f);
    std::vector<float> s_rec(init.size()), s_chunk(init.size());
    gated_delta_recurrent_forward(o_rec.data(), s_rec.data(), state_init, in.q.data(),
                                  in.k.data(), in.v.data(), in.g.data(), in.beta.data(), N, H, Dk,
                                  Dv);
    gated_delta_chunked_forward(o_chunk.data(), s_chunk.data(), state_init, in.q.data(),
                                in.k.data(), in.v.data(), in.g.data(), in.beta.data(), N, H, Dk,
                                Dv);
    ASSERT_TRUE(test::all_finite(o_chunk));
    EXPECT_LE(max_abs_diff(o_rec, o_chunk), 1e-5 * std::max(1.0, max_abs(o_rec))) << "N=" << N;
    EXPECT_LE(max_abs_diff(s_rec, s_chunk), 1e-5 * std::max(1.0, max_abs(s_rec))) << "N=" << N;
  }
}

class GatedLinearForms : public ::testing::TestWithParam<int> {};

TEST_P(GatedLinearForms, ChunkedEqualsRecurrent) {
  const int N = GetParam(), H = 3, Dk = 16, Dv = 12;
  DeltaInputs<float> in(N, H, Dk, Dv, 200 + N);
  std::vector<float> g = random_vector<float>((size_t)N * H * Dk, 9, -0.2, 0.0);
  std::vector<float> init = random_vector<float>((size_t)H * Dk * Dv, 8, -0.5, 0.5);
  for (const float* decay : {(const float*)nullptr, (const float*)g.data()}) {
    std::vector<float> o_rec((size_t)N * H * Dv), o_chunk(o_rec.size(), -99.0f);
    std::vector<float> s_rec(init.size()), s_chunk(init.size());
    gated_linear_recurrent_forward(o_rec.data(), s_rec.data(), init.data(), in.q.data(),
                                   in.k.data(), in.v.data(), decay, N, H, Dk, Dv);
    gated_linear_chunked_forward(o_chunk.data(), s_chunk.data(), init.data(), in.q.data(),
                                 in.k.data(), in.v.data(), decay, N, H, Dk, Dv);
    ASSERT_TRUE(test::all_finite(o_chunk));
    // Without decay the state grows like N: tolerance relative to the output scale.
    EXPECT_LE(max_abs_diff(o_rec, o_chunk), 1e-5 * std::max(1.0, max_abs(o_rec))) << "N=" << N;
    EXPECT_LE(max_abs_diff(s_rec, s_chunk), 1e-5 * std::max(1.0, max_abs(s_rec))) << "N=" << N;
  }
}

// Lengths around the chunk of 64: one token, within one chunk, exactly one chunk, one more,
// not a multiple, 3·64 + 1.
INSTANTIATE_TEST_SUITE_P(Lengths, GatedDeltaForms, ::testing::Values(1, 7, 63, 64, 65, 100, 193));
INSTANTIATE_TEST_SUITE_P(Lengths, GatedLinearForms, ::testing::Values(1, 7, 63, 64, 65, 100, 193));

// Loss Σ r·o in fp64; each input perturbed in turn. N = 70 crosses a backward segment boundary.
TEST(GatedDeltaBackward, MatchesFiniteDifferencesFp64) {
  const int N = 70, H = 2, Dk = 4, Dv = 3;
  DeltaInputs<double> in(N, H, Dk, Dv, 300);
  for (auto& x : in.g) x *= 3;  // stronger decay than the forward test
  const auto r = random_vector<double>((size_t)N * H * Dv, 301);
  auto loss = [&] {
    std::vector<double> o((size_t)N * H * Dv);
    gated_delta_recurrent_forward(o.data(), (double*)nullptr, (const double*)nullptr,
                                  in.q.data(), in.k.data(), in.v.data(), in.g.data(),
                                  in.beta.data(), N, H, Dk, Dv);
    return test::dot_all(o, r);
  };
  std::vector<double> dq(in.q.size()), dk(in.k.size()), dv(in.v.size()), dg(in.g.size()),
      dbeta(in.beta.size());
  gated_delta_backward(dq.data(), dk.data(), dv.data(), dg.data(), dbeta.data(), r.data(),
                       in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), N, H,
                       Dk, Dv);
  EXPECT_LE(test::finite_difference_ratio(in.q, dq, loss), 1.0) << "q";
  EXPECT_LE(test::finite_difference_ratio(in.k, dk, loss), 1.0) << "k";
  EXPECT_LE(test::finite_difference_ratio(in.v, dv, loss), 1.0) << "v";
  EXPECT_LE(test::finite_difference_ratio(in.g, dg, loss), 1.0) << "g";
  EXPECT_LE(test::finite_difference_ratio(in.beta, dbeta, loss), 1.0) << "beta";
}

TEST(GatedLinearBackward, MatchesFiniteDifferencesFp64) {
  const int N = 70, H = 2, Dk = 4, Dv = 3;
  DeltaInputs<double> in(N, H, Dk, Dv, 400);
  auto g = random_vector<double>((size_t)N * H * Dk, 401, -0.5, 0.0);
  const auto r = random_vector<double>((size_t)N * H * Dv, 402);
  for (bool with_decay : {false, true}) {
    auto loss = [&] {
      std::vector<double> o((size_t)N * H * Dv);
      gated_linear_recurrent_forward(o.data(), (double*)nullptr, (const double*)nullptr,
                                     in.q.data(), in.k.data(), in.v.data(),
                                     with_decay ? g.data() : nullptr, N, H, Dk, Dv);
      return test::dot_all(o, r);
    };
    std::vector<double> dq(in.q.size()), dk(in.k.size()), dv(in.v.size()), dg(g.size());
    gated_linear_backward(dq.data(), dk.data(), dv.data(), dg.data(), r.data(), in.q.data(),
                          in.k.data(), in.v.data(), with_decay ? g.data() : nullptr, N, H, Dk, Dv);
    EXPECT_LE(test::finite_difference_ratio(in.q, dq, loss), 1.0) << "q " << with_decay;
    EXPECT_LE(test::finite_difference_ratio(in.k, dk, loss), 1.0) << "k " << with_decay;
    EXPECT_LE(test::finite_difference_ratio(in.v, dv, loss), 1.0) << "v " << with_decay;
    if (with_decay) {
      EXPECT_LE(test::finite_difference_ratio(g, dg, loss), 1.0) << "g";
    }
  }
}

// The backward accumulates: calling it twice doubles the gradients.
TEST(GatedDeltaBackward, Accumulates) {
  const int N = 5, H = 1, Dk = 4, Dv = 4;
  DeltaInputs<double> in(N, H, Dk, Dv, 500);
  const auto r = random_vector<double>((size_t)N * H * Dv, 501);
  std::vector<double> once[5], twice[5];
  for (auto* set : {once, twice}) {
    for (auto& x : {0, 1, 2, 3, 4}) set[x].assign(x < 3 ? in.q.size() : in.g.size(), 0.0);
    for (int rep = 0; rep < (set == once ? 1 : 2); ++rep)
      gated_delta_backward(set[0].data(), set[1].data(), set[2].data(), set[3].data(),
                           set[4].data(), r.data(), in.q.data(), in.k.data(), in.v.data(),
                           in.g.data(), in.beta.data(), N, H, Dk, Dv);
  }
  for (int i = 0; i < 5; ++i)
    for (size_t j = 0; j < once[i].size(); ++j) EXPECT_NEAR(twice[i][j], 2 * once[i][j], 1e-12);
}

}  // namespace
}  // namespace golinear::kernels::cpu
