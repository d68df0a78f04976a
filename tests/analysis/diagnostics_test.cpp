// The diagnostics of DESIGN.md §5 on constructed inputs whose values are worked out by hand:
// key concentration, projection residual, attention mass, NMSE, Spearman, hardness, selection.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "analysis/diagnostics.h"

namespace golinear::analysis {
namespace {

// Tolerance for values computed in double and stored as float.
constexpr float kFloatTol = 2e-6f;

TEST(UnitKeys, DivideEachKeyByItsNorm) {
  // T = 1, G = 2, D = 2: (3, 4) and (0, 2).
  const std::vector<float> k = {3, 4, 0, 2};
  std::vector<float> k_hat(4);
  unit_keys(k_hat.data(), k.data(), 1, 2, 2);
  EXPECT_NEAR(k_hat[0], 0.6f, kFloatTol);
  EXPECT_NEAR(k_hat[1], 0.8f, kFloatTol);
  EXPECT_NEAR(k_hat[2], 0.0f, kFloatTol);
  EXPECT_NEAR(k_hat[3], 1.0f, kFloatTol);
}

TEST(KeyDiagnostics, AllKeysEqualGiveConcentrationOneResidualZero) {
  const int T = 16, G = 1, D = 8;
  std::vector<float> k((long)T * G * D);
  for (int t = 0; t < T; ++t)
    for (int d = 0; d < D; ++d) k[(long)t * D + d] = (float)(d + 1) * (t + 1);  // same direction
  std::vector<float> k_hat(k.size()), c(T), r(T);
  unit_keys(k_hat.data(), k.data(), T, G, D);
  key_concentration(c.data(), k_hat.data(), T, G, D);
  projection_residual(r.data(), k_hat.data(), T, G, D);
  for (int t = 0; t < T; ++t) {
    EXPECT_NEAR(c[t], 1.0f, 1e-5f) << "t = " << t;
    EXPECT_EQ(r[t], 0.0f) << "t = " << t;
  }
}

TEST(KeyDiagnostics, OrthogonalKeysGiveConcentrationOneOverSqrtT) {
  const int T = 6, G = 1, D = 6;
  std::vector<float> k((long)T * D, 0.0f);
  for (int t = 0; t < T; ++t) k[(long)t * D + t] = 0.5f + t;  // e_t scaled: unit_keys normalizes
  std::vector<float> k_hat(k.size()), c(T), r(T);
  unit_keys(k_hat.data(), k.data(), T, G, D);
  key_concentration(c.data(), k_hat.data(), T, G, D);
  projection_residual(r.data(), k_hat.data(), T, G, D);
  for (int t = 0; t < T; ++t) {
    // t + 1 keys (1-based count): ‖(1/(t+1)) Σ e_j‖ = sqrt(t+1)/(t+1).
    EXPECT_NEAR(c[t], 1.0 / std::sqrt(t + 1.0), 1e-5) << "t = " << t;
    // k̄·e_t = 1/(t+1) = ‖k̄‖², so Πk̂_t = k̄ and the deviation is orthogonal to k̄: r = 0.
    EXPECT_NEAR(r[t], 0.0f, 1e-5f) << "t = " << t;
  }
}

TEST(KeyDiagnostics, HandWorkedRankOneCase) {
  // Keys e1, e1, e2 (D = 3). At t = 2: k̄ = (2/3, 1/3, 0), ‖k̄‖ = √5/3.
  //   Πk̂ = (k̄·e2/‖k̄‖²) k̄ = (1/3)/(5/9) k̄ = (3/5) k̄;  numerator ‖Πk̂ − k̄‖ = (2/5)(√5/3) = 2/(3√5);
  //   denominator ‖e2 − k̄‖ = ‖(−2/3, 2/3, 0)‖ = 2√2/3;   r = 1/√10.
  const int T = 3, G = 1, D = 3;
  const std::vector<float> k = {1, 0, 0, 1, 0, 0, 0, 1, 0};
  std::vector<float> c(T), r(T);
  key_concentration(c.data(), k.data(), T, G, D);
  projection_residual(r.data(), k.data(), T, G, D);
  EXPECT_NEAR(c[0], 1.0f, kFloatTol);
  EXPECT_NEAR(c[1], 1.0f, kFloatTol);
  EXPECT_NEAR(c[2], std::sqrt(5.0) / 3.0, kFloatTol);
  EXPECT_EQ(r[0], 0.0f);  // the key is the mean
  EXPECT_EQ(r[1], 0.0f);
  EXPECT_NEAR(r[2], 1.0 / std::sqrt(10.0), kFloatTol);
}

TEST(KeyDiagnostics, DeviationAlongTheMeanGivesResidualOne) {
  // Keys e1, e1, e1, −e1: k̄_3 = e1/2, k̂ − k̄ = −(3/2) e1 lies along k̄, Πk̂ = k̂: r = 1.
  // Keys e1, −e1: k̄_1 = 0, no mean direction (Π = 0): r = 0 by convention, c = 0.
  const int D = 2;
  const std::vector<float> a = {1, 0, 1, 0, 1, 0, -1, 0};
  std::vector<float> c(4), r(4);
  key_concentration(c.data(), a.data(), 4, 1, D);
  projection_residual(r.data(), a.data(), 4, 1, D);
  EXPECT_NEAR(c[3], 0.5f, kFloatTol);
  EXPECT_NEAR(r[3], 1.0f, kFloatTol);
  const std::vector<float> b = {1, 0, -1, 0};
  key_concentration(c.data(), b.data(), 2, 1, D);
  projection_residual(r.data(), b.data(), 2, 1, D);
  EXPECT_NEAR(c[1], 0.0f, kFloatTol);
  EXPECT_EQ(r[1], 0.0f);
}

TEST(KeyDiagnostics, KvHeadsAreIndependentStreams) {
  // G = 2 interleaved per token: head 0 always e1, head 1 walks e1, e2, e3.
  const int T = 3, G = 2, D = 3;
  std::vector<float> k((long)T * G * D, 0.0f);
  for (int t = 0; t < T; ++t) {
    k[((long)t * G + 0) * D + 0] = 1;
    k[((long)t * G + 1) * D + t] = 1;
  }
  std::vector<float> c(T * G), r(T * G);
  key_concentration(c.data(), k.data(), T, G, D);
  projection_residual(r.data(), k.data(), T, G, D);
  for (int t = 0; t < T; ++t) {
    EXPECT_NEAR(c[t * G + 0], 1.0f, kFloatTol);
    EXPECT_NEAR(c[t * G + 1], 1.0 / std::sqrt(t + 1.0), kFloatTol);
    EXPECT_NEAR(r[t * G + 0], 0.0f, kFloatTol);
    EXPECT_NEAR(r[t * G + 1], 0.0f, kFloatTol);
  }
}

TEST(AttentionMass, UniformAttentionSplitsByCount) {
  // q = 0: every score is 0, the attention is uniform over j ≤ t.
  const int T = 12, H = 2, G = 1, D = 4, sinks = 3, window = 4;
  std::vector<float> q((long)T * H * D, 0.0f), k((long)T * G * D), inv_freq(D / 2, 0.01f);
  for (size_t i = 0; i < k.size(); ++i) k[i] = std::sin(0.7f * i);
  std::vector<float> sink((long)T * H), far((long)T * H);
  attention_mass(sink.data(), far.data(), q.data(), k.data(), inv_freq.data(), T, H, G, D, sinks,
                 window);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      const double n = t + 1;
      const double sink_count = std::min(sinks, t + 1);
      const double far_count = std::max(0, t - window - sinks + 1);  // sinks ≤ j ≤ t − window
      EXPECT_NEAR(sink[t * H + h], sink_count / n, 1e-6) << "t = " << t;
      EXPECT_NEAR(far[t * H + h], far_count / n, 1e-6) << "t = " << t;
    }
}

TEST(AttentionMass, AFirstKeyThatDominatesTakesAllTheMass) {
  // inv_freq = 0 makes RoPE the identity; q_t = 10·e1, k_0 = 10·e1, other keys 0: the score of
  // j = 0 is 100/√4 = 50, the others 0, so p_0 = 1/(1 + t·e^−50) ≈ 1.
  const int T = 8, H = 1, G = 1, D = 4;
  std::vector<float> q((long)T * D, 0.0f), k((long)T * D, 0.0f), inv_freq(D / 2, 0.0f);
  for (int t = 0; t < T; ++t) q[(long)t * D] = 10.0f;
  k[0] = 10.0f;
  std::vector<float> sink(T);
  attention_mass(sink.data(), nullptr, q.data(), k.data(), inv_freq.data(), T, H, G, D, 1, 2);
  for (int t = 0; t < T; ++t) EXPECT_NEAR(sink[t], 1.0f, 1e-6f) << "t = " << t;
}

TEST(Nmse, KnownArrays) {
  const std::vector<float> teacher = {1, 1, 1, 2}, student = {1, 2, 3, 2};
  // errors 0, 1, 4, 0 → 5; reference 1 + 1 + 1 + 4 = 7.
  EXPECT_DOUBLE_EQ(nmse(student.data(), teacher.data(), 4), 5.0 / 7.0);
  EXPECT_DOUBLE_EQ(nmse(teacher.data(), teacher.data(), 4), 0.0);
  const std::vector<float> zeros = {0, 0};
  EXPECT_DOUBLE_EQ(nmse(zeros.data(), zeros.data(), 2), 0.0);
  EXPECT_TRUE(std::isinf(nmse(teacher.data(), zeros.data(), 2)));

  // Two rows of width 2, accumulated twice: the sums double, the ratio per row stays.
  std::vector<double> error(2, 0.0), reference(2, 0.0);
  for (int pass = 0; pass < 2; ++pass)
    accumulate_squared_error(error.data(), reference.data(), student.data(), teacher.data(), 2, 2);
  EXPECT_DOUBLE_EQ(error[0], 2.0);      // 2 × (0 + 1)
  EXPECT_DOUBLE_EQ(reference[0], 4.0);  // 2 × (1 + 1)
  EXPECT_DOUBLE_EQ(error[1], 8.0);      // 2 × (4 + 0)
  EXPECT_DOUBLE_EQ(reference[1], 10.0); // 2 × (1 + 4)
}

TEST(Spearman, RanksWithTies) {
  const std::vector<double> ranks = ranks_with_ties({10, 20, 20, 5});
  EXPECT_EQ(ranks, (std::vector<double>{2, 3.5, 3.5, 1}));
  EXPECT_EQ(ranks_with_ties({7, 7, 7}), (std::vector<double>{2, 2, 2}));
}

TEST(Spearman, KnownValues) {
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {10, 20, 30, 400}), 1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  // Ties on one side: ranks {1, 2.5, 2.5, 4} against {1, 3, 2, 4}: cov 4.5, variances 4.5 and 5.
  EXPECT_NEAR(spearman({1, 2, 2, 3}, {1, 3, 2, 4}), 3.0 / std::sqrt(10.0), 1e-12);
  // y = {5, 6, 7, 8, 7}: ranks {1, 2, 3.5, 5, 3.5}; cov 8, variances 10 and 9.5.
  EXPECT_NEAR(spearman({1, 2, 3, 4, 5}, {5, 6, 7, 8, 7}), 8.0 / std::sqrt(95.0), 1e-12);
  EXPECT_TRUE(std::isnan(spearman({1, 1, 1}, {1, 2, 3})));
  EXPECT_TRUE(std::isnan(spearman({1}, {1})));
  EXPECT_TRUE(std::isnan(spearman({1, 2}, {1, 2, 3})));
}

TEST(Hardness, RankNormalizedTerms) {
  EXPECT_EQ(rank_normalize({3, 1, 2}), (std::vector<double>{1, 0, 0.5}));
  EXPECT_EQ(rank_normalize({1, 1, 2}), (std::vector<double>{0.25, 0.25, 1}));
  EXPECT_EQ(rank_normalize({4}), (std::vector<double>{0.5}));
  // Low concentration and high residual are hard: layer 1 is the hardest on both.
  const std::vector<double> c = {0.9, 0.5, 0.7}, r = {0.1, 0.3, 0.2};
  const std::vector<double> teacher = layer_hardness(c, r);
  ASSERT_EQ(teacher.size(), 3u);
  EXPECT_DOUBLE_EQ(teacher[0], 0.0);
  EXPECT_DOUBLE_EQ(teacher[1], 1.0);
  EXPECT_DOUBLE_EQ(teacher[2], 0.5);
  // NMSE ranks the other way round: (0 + 0 + 1)/3, (1 + 1 + 0)/3, (0.5 + 0.5 + 0.5)/3.
  const std::vector<double> with_nmse = layer_hardness(c, r, {0.3, 0.1, 0.2});
  EXPECT_DOUBLE_EQ(with_nmse[0], 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(with_nmse[1], 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(with_nmse[2], 0.5);
}

TEST(SelectFullLayers, HardPicksTheKHardest) {
  const std::vector<double> hardness = {0.1, 0.9, 0.3, 0.8, 0.2, 0.7, 0.0, 0.4};
  auto one = select_full_layers(hardness, 1, "hard");
  ASSERT_TRUE(one.ok()) << one.error();
  EXPECT_EQ(*one, (std::vector<int>{1}));
  auto three = select_full_layers(hardness, 3, "hard");
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(*three, (std::vector<int>{1, 3, 5}));  // ascending order
  auto none = select_full_layers(hardness, 0, "hard");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  // Ties go to the lower layer index.
  auto tied = select_full_layers({0.5, 0.9, 0.5, 0.5}, 2, "hard");
  ASSERT_TRUE(tied.ok());
  EXPECT_EQ(*tied, (std::vector<int>{0, 1}));
}

TEST(SelectFullLayers, UniformPicksTheDocumentedIndices) {
  const std::vector<double> eight(8, 0.0);
  auto pick = [&](const std::vector<double>& h, int K) {
    auto layers = select_full_layers(h, K, "uniform");
    EXPECT_TRUE(layers.ok()) << layers.error();
    return layers.ok() ? *layers : std::vector<int>{};
  };
  // floor((i + 0.5) · L / K).
  EXPECT_EQ(pick(eight, 1), (std::vector<int>{4}));
  EXPECT_EQ(pick(eight, 2), (std::vector<int>{2, 6}));
  EXPECT_EQ(pick(eight, 3), (std::vector<int>{1, 4, 6}));
  EXPECT_EQ(pick(eight, 4), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(pick(eight, 8), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(pick(std::vector<double>(5, 0.0), 2), (std::vector<int>{1, 3}));
  // Hardness is not read.
  EXPECT_EQ(pick({9, 0, 0, 0, 0, 0, 0, 0}, 1), (std::vector<int>{4}));
}

TEST(SelectFullLayers, RefusesBadArguments) {
  const std::vector<double> hardness(4, 0.5);
  auto too_many = select_full_layers(hardness, 5, "hard");
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.error().find("K = 5 must be in [0, 4]"), std::string::npos) << too_many.error();
  EXPECT_FALSE(select_full_layers(hardness, -1, "uniform").ok());
  auto method = select_full_layers(hardness, 1, "random");
  ASSERT_FALSE(method.ok());
  EXPECT_NE(method.error().find("unknown method 'random'"), std::string::npos) << method.error();
  auto nan = select_full_layers({0.1, std::numeric_limits<double>::quiet_NaN()}, 1, "hard");
  EXPECT_FALSE(nan.ok());
}

}  // namespace
}  // namespace golinear::analysis
