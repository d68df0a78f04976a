#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace golinear::runtime {

int32_t argmax(const float* values, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i)
    if (values[i] > values[best]) best = i;
  return best;
}

double Sampler::next_uniform() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

int32_t Sampler::sample(const float* logits, int V) {
  if (options_.temperature <= 0.0f) return argmax(logits, V);
  const float m = *std::max_element(logits, logits + V);
  std::vector<double> p(V);
  double total = 0;
  for (int i = 0; i < V; ++i) total += p[i] = std::exp((double)(logits[i] - m) / options_.temperature);
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  // Top-k: the k most likely; then the nucleus: the smallest prefix of those with mass ≥ top_p
  // of theirs; min-p: only tokens at least min_p times as likely as the first. Only the first
  // `limit` of the order are read (the comparison is a total order: the same prefix as a sort).
  const int limit = options_.top_k > 0 && options_.top_k < V ? options_.top_k : V;
  std::partial_sort(order.begin(), order.begin() + limit, order.end(),
                    [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  double limit_mass = total;
  if (limit < V) {
    limit_mass = 0;
    for (int i = 0; i < limit; ++i) limit_mass += p[order[i]];
  }
  const double floor = (double)options_.min_p * p[order[0]];
  double kept = 0;
  int n = 0;
  while (n < limit && (n == 0 || (kept < options_.top_p * limit_mass && p[order[n]] >= floor)))
    kept += p[order[n++]];
  double r = next_uniform() * kept;
  for (int i = 0; i < n; ++i) {
    r -= p[order[i]];
    if (r < 0) return order[i];
  }
  return order[n - 1];
}

}  // namespace golinear::runtime
