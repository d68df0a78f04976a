// The sampler (runtime/sampler.h) against the plain definition: for random logits (ties
// included) the kept set of top-k, top-p and min-p is exactly that of a full sort, its weights
// are exp((l − max)/T) to float accuracy, and draws land on the kept tokens in proportion to
// their probabilities (chi-square).
#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

namespace golinear::runtime {
namespace {

// The definition, plainly: every token sorted by weight (equal weights: lower id first); the
// top-k; the smallest prefix of those whose mass reaches top_p of theirs (all at top_p ≥ 1),
// cut before the first token under min_p times the most likely one's weight. The top-k's mass
// is summed in sorted order, everything's (no top-k) in id order, as the sampler sums them.
std::vector<int32_t> reference_kept(const float* w, int V, const SamplerOptions& o) {
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); });
  const int limit = o.top_k > 0 && o.top_k < V ? o.top_k : V;
  double limit_mass = 0;
  if (limit < V)
    for (int i = 0; i < limit; ++i) limit_mass += w[order[i]];
  else
    for (int i = 0; i < V; ++i) limit_mass += w[i];
  const double floor = (double)o.min_p * w[order[0]];
  double kept = 0;
  int n = 0;
  while (n < limit &&
         (n == 0 || ((o.top_p >= 1 || kept < o.top_p * limit_mass) && w[order[n]] >= floor)))
    kept += w[order[n++]];
  order.resize(n);
  return order;
}

// V logits: Gaussian (σ 3), or with many ties (halves in [-4, 0]).
std::vector<float> random_logits(int V, bool ties, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> level(0, 8);
  std::vector<float> logits(V);
  for (float& l : logits) l = ties ? -0.5f * level(rng) : normal(rng);
  return logits;
}

TEST(Sampler, KeptSetEqualsTheFullSortDefinition) {
  std::mt19937 rng(11);
  int cases = 0, restricted = 0;
  for (int V : {1, 2, 3, 7, 64, 65, 300, 1000, 3000})
    for (bool ties : {false, true})
      for (float temperature : {0.5f, 1.0f, 2.0f})
        for (int top_k : {0, 1, 5, V + 3})
          for (float top_p : {1.0f, 0.9f, 0.3f, 0.01f})
            for (float min_p : {0.0f, 0.05f, 0.5f}) {
              const std::vector<float> logits = random_logits(V, ties, rng);
              const SamplerOptions options{temperature, top_p, 1, top_k, min_p};
              Sampler sampler(options);
              const SamplerCandidates c = sampler.candidates(logits.data(), V);
              const std::vector<int32_t> want = reference_kept(c.weight, V, options);
              const std::string where = testing::PrintToString(
                  std::make_tuple(V, ties, temperature, top_k, top_p, min_p));
              ASSERT_EQ(c.n, (int)want.size()) << where;
              double want_mass = 0;
              for (int32_t id : want) want_mass += c.weight[id];
              if (c.ids) {  // restricted: the same tokens in the same order, the same mass
                ++restricted;
                ASSERT_EQ(std::vector<int32_t>(c.ids, c.ids + c.n), want) << where;
                ASSERT_EQ(c.mass, want_mass) << where;
              } else {  // unrestricted: everything, in id order
                ASSERT_EQ(c.n, V) << where;
                ASSERT_NEAR(c.mass, want_mass, 1e-12 * want_mass) << where;
              }
              const float m = *std::max_element(logits.begin(), logits.end());
              for (int i = 0; i < V; ++i) {
                // The float argument x carries a relative error of 2^-24, the weight |x|·2^-24
                // more: at most 2^-24/e of the max's weight.
                const double x = ((double)logits[i] - m) / temperature;
                const double exact = std::exp(x);
                ASSERT_NEAR(c.weight[i], exact, (1e-6 + 1.2e-7 * std::fabs(x)) * exact + 1e-37)
                    << where << " token " << i;
              }
              ++cases;
            }
  EXPECT_EQ(cases, 9 * 2 * 3 * 4 * 4 * 3);
  EXPECT_GT(restricted, cases / 2);
}

// A nucleus of thousands of tokens (flat logits, V 20000): the prefix is sorted further several
// times, and the kept set is still the definition's.
TEST(Sampler, LargeNucleusGrowsThePrefix) {
  std::mt19937 rng(5);
  const int V = 20000;
  std::vector<float> logits(V);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  for (float& l : logits) l = normal(rng);
  for (float top_p : {0.5f, 0.99f}) {
    const SamplerOptions options{1.0f, top_p, 1, 0, 0.0f};
    Sampler sampler(options);
    const SamplerCandidates c = sampler.candidates(logits.data(), V);
    ASSERT_GT(c.n, 5000);
    EXPECT_EQ(std::vector<int32_t>(c.ids, c.ids + c.n), reference_kept(c.weight, V, options));
  }
}

// Draws over the kept set against its renormalised probabilities (from double exp): Pearson's
// chi-square over categories of expected count ≥ 5 (the rest pooled) stays under df + 6·√(2 df).
// A token dropped from or added to the set, or a walk with the wrong mass, moves it far past.
// V 60 is one block of the unrestricted draw's block walk, V 1000 four (the last one partial).
TEST(Sampler, DrawsFollowTheKeptProbabilities) {
  std::mt19937 rng(3);
  for (const int V : {60, 1000}) {
    const int draws = 30000;
    const std::vector<float> logits = random_logits(V, false, rng);
    const std::vector<float> tied = random_logits(V, true, rng);
    for (const auto& [options, values] :
         {std::pair{SamplerOptions{1.0f, 1.0f, 9, 0, 0.0f}, &logits},
          std::pair{SamplerOptions{2.0f, 1.0f, 9, 0, 0.0f}, &logits},
          std::pair{SamplerOptions{1.0f, 0.9f, 9, 0, 0.0f}, &logits},
          std::pair{SamplerOptions{2.0f, 0.95f, 9, 0, 0.0f}, &logits},
          std::pair{SamplerOptions{1.0f, 1.0f, 9, 5, 0.0f}, &logits},
          std::pair{SamplerOptions{2.0f, 1.0f, 9, 0, 0.05f}, &logits},
          std::pair{SamplerOptions{1.0f, 0.7f, 9, 0, 0.0f}, &tied},
          std::pair{SamplerOptions{1.0f, 0.9f, 9, 20, 0.1f}, &tied}}) {
      const bool restricted = options.top_k > 0 || options.top_p < 1 || options.min_p > 0;
      if (V > 60 && restricted) continue;  // the block walk is the unrestricted draw's
      Sampler sampler(options);
      const float* l = values->data();
      std::vector<int32_t> kept = reference_kept(sampler.candidates(l, V).weight, V, options);
      const float m = *std::max_element(l, l + V);
      std::vector<double> p(V, 0.0);
      double mass = 0;
      for (int32_t id : kept) mass += p[id] = std::exp(((double)l[id] - m) / options.temperature);
      std::vector<int> count(V, 0);
      for (int i = 0; i < draws; ++i) ++count[sampler.sample(l, V)];
      double chi2 = 0, pooled_expected = 0, pooled_count = 0;
      int df = -1;
      for (int id = 0; id < V; ++id) {
        const double expected = draws * p[id] / mass;
        if (expected == 0) {
          ASSERT_EQ(count[id], 0) << "token " << id << " is not kept";
        } else if (expected < 5) {
          pooled_expected += expected;
          pooled_count += count[id];
        } else {
          chi2 += (count[id] - expected) * (count[id] - expected) / expected;
          ++df;
        }
      }
      if (pooled_expected > 0) {
        chi2 += (pooled_count - pooled_expected) * (pooled_count - pooled_expected) /
                std::max(pooled_expected, 1.0);
        ++df;
      }
      const std::string where = testing::PrintToString(std::make_tuple(
          options.temperature, options.top_p, options.top_k, options.min_p, kept.size()));
      if (df <= 0) continue;  // one token kept: its count is checked above
      EXPECT_LT(chi2, df + 6 * std::sqrt(2.0 * df)) << where << " V " << V << " df " << df;
    }
  }
}

TEST(Sampler, GreedyAtTemperatureZeroAndTinyTemperature) {
  std::vector<float> logits = {0.5f, 3.0f, 3.0f, -1.0f};
  Sampler greedy({0.0f, 1.0f, 1, 0, 0.0f});
  EXPECT_EQ(greedy.sample(logits.data(), 4), 1);
  // 1/T overflows: only the max's weight survives; the tie draws between the two maxima.
  Sampler tiny({1e-40f, 1.0f, 1, 0, 0.0f});
  for (int i = 0; i < 20; ++i) {
    const int32_t id = tiny.sample(logits.data(), 4);
    EXPECT_TRUE(id == 1 || id == 2) << id;
  }
}

// A masked token (logit −inf) and one far below the max (e^x under FLT_MIN) weigh 0 and are
// never drawn, whatever the restriction.
TEST(Sampler, MaskedTokensAreNeverDrawn) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> logits(700, 0.0f);
  for (int i = 0; i < 700; i += 2) logits[i] = i % 4 ? -inf : -200.0f;
  for (const SamplerOptions& options :
       {SamplerOptions{1.0f, 1.0f, 4, 0, 0.0f}, SamplerOptions{1.0f, 0.9f, 4, 0, 0.0f},
        SamplerOptions{1.0f, 1.0f, 4, 600, 0.0f}, SamplerOptions{1.0f, 1.0f, 4, 0, 0.01f}}) {
    Sampler sampler(options);
    EXPECT_EQ(sampler.candidates(logits.data(), 700).weight[2], 0.0f);
    for (int i = 0; i < 2000; ++i) ASSERT_EQ(sampler.sample(logits.data(), 700) % 2, 1);
  }
}

}  // namespace
}  // namespace golinear::runtime
