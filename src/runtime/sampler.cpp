#include "runtime/sampler.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <numeric>

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

void Sampler::sort_range(int begin, int end) {
  const float* w = weight_.data();
  // A total order (weight, then lower id): the same sequence as a full sort of every token.
  auto more_likely = [w](int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); };
  auto first = order_.begin() + begin, last = order_.begin() + end;
  if (last != order_.end()) std::nth_element(first, last, order_.end(), more_likely);
  std::sort(first, last, more_likely);
}

SamplerCandidates Sampler::candidates(const float* logits, int V) {
  weight_.resize(V);
  float* w = weight_.data();
  const float m = *std::max_element(logits, logits + V);
  // A temperature so small that its inverse overflows keeps only the max's weight (greedy).
  const float inverse_temperature = std::min(1.0f / options_.temperature, FLT_MAX);
  double total = 0;
  for (int i = 0; i < V; ++i) total += w[i] = std::exp((logits[i] - m) * inverse_temperature);

  const int limit = options_.top_k > 0 && options_.top_k < V ? options_.top_k : V;
  const bool nucleus = options_.top_p < 1.0f;
  if (limit == V && !nucleus && options_.min_p <= 0.0f) return {w, nullptr, V, total};

  // The candidates, sorted only as far as the restrictions read. min-p compares with the most
  // likely token's weight, exp(0) = 1: the tokens below that floor are never kept and are left
  // out at once, unless top-k needs all of them for its mass. (The first token is kept whatever
  // the floor: a min_p above 1 keeps the first of those of weight 1.)
  const double floor = options_.min_p > 0.0f ? (double)options_.min_p : 0.0;
  order_.clear();
  if (floor > 0 && limit == V) {
    const double prefilter = std::min(floor, 1.0);
    for (int i = 0; i < V; ++i)
      if (w[i] >= prefilter) order_.push_back(i);
  } else {
    order_.resize(V);
    std::iota(order_.begin(), order_.end(), 0);
  }
  const double target_fraction = options_.top_p;
  if (nucleus && limit == V) {
    // The nucleus lies among the most likely tokens whose mass reaches top_p of the total: bin the
    // candidates by the binary exponent of their weight (a weight's bits order as the weight)
    // and drop the bins below the one where the mass from the top reaches it. The margin covers
    // the rounding of summing in another order than the walk's.
    double bin_mass[256] = {};
    for (int32_t i : order_) bin_mass[std::bit_cast<uint32_t>(w[i]) >> 23] += w[i];
    double mass = 0;
    int bin = 255;
    for (; bin > 0; --bin)
      if ((mass += bin_mass[bin]) >= target_fraction * total * (1 + 1e-9)) break;
    const uint32_t lowest = (uint32_t)bin << 23;
    if (bin > 0)
      order_.erase(
          std::remove_if(order_.begin(), order_.end(),
                         [&](int32_t i) { return std::bit_cast<uint32_t>(w[i]) < lowest; }),
          order_.end());
  }
  double limit_mass = total;  // the top-k's mass
  int sorted = 0;             // order_[0, sorted) is in its final order
  const int size = (int)order_.size();
  if (limit < V) {
    sort_range(0, limit);
    sorted = limit;
    limit_mass = 0;
    for (int i = 0; i < limit; ++i) limit_mass += w[order_[i]];
  }
  const int end = std::min(limit, size);
  // The smallest prefix whose mass reaches top_p of the top-k's, cut where min-p drops a token:
  // the first is always kept; the prefix is sorted further whenever the walk reaches its end.
  const double target = target_fraction * limit_mass;
  double kept = 0;
  int n = 0;
  while (n < end) {
    if (n > 0 && nucleus && kept >= target) break;
    if (n == sorted) {
      const int grown = std::min(end, std::max(64, 4 * sorted));
      sort_range(sorted, grown);
      sorted = grown;
    }
    if (n > 0 && w[order_[n]] < floor) break;
    kept += w[order_[n++]];
  }
  return {w, order_.data(), n, kept};
}

int32_t Sampler::sample(const float* logits, int V) {
  if (options_.temperature <= 0.0f) return argmax(logits, V);
  const SamplerCandidates c = candidates(logits, V);
  const double r = next_uniform() * c.mass;
  // The first token whose running mass passes r; rounding can leave r at or past the sum, then
  // the last kept token of positive weight.
  double running = 0;
  int32_t last = -1;
  for (int i = 0; i < c.n; ++i) {
    const int32_t id = c.ids ? c.ids[i] : i;
    if (c.weight[id] <= 0) continue;
    running += c.weight[id];
    last = id;
    if (r < running) return id;
  }
  return last >= 0 ? last : (c.ids ? c.ids[0] : argmax(logits, V));
}

}  // namespace golinear::runtime
