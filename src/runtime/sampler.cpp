#include "runtime/sampler.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <numeric>

#include "kernels/cpu/fast_exp.h"

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
  float m = logits[0];
#pragma omp simd reduction(max : m)
  for (int i = 1; i < V; ++i) m = std::max(m, logits[i]);
  // A temperature so small that its inverse overflows keeps only the max's weight (greedy).
  const float inverse_temperature = std::min(1.0f / options_.temperature, FLT_MAX);
#pragma omp simd
  for (int i = 0; i < V; ++i) w[i] = kernels::cpu::exp_nonpositive((logits[i] - m) * inverse_temperature);
  // The total in double, over kBlock-token blocks (the draw skips whole blocks), each summed in
  // 8 interleaved lanes: a fixed order, so the same on every build.
  const int blocks = (V + kBlock - 1) / kBlock;
  block_mass_.resize(blocks);
  double total = 0;
  for (int k = 0; k < blocks; ++k) {
    const int begin = k * kBlock, end = std::min(V, begin + kBlock);
    double lane[8] = {};
    int i = begin;
    for (; i + 8 <= end; i += 8)
      for (int j = 0; j < 8; ++j) lane[j] += w[i + j];
    for (; i < end; ++i) lane[0] += w[i];
    const double block =
        ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    total += block_mass_[k] = block;
  }

  const int limit = options_.top_k > 0 && options_.top_k < V ? options_.top_k : V;
  const bool nucleus = options_.top_p < 1.0f;
  if (limit == V && !nucleus && options_.min_p <= 0.0f) return {w, nullptr, V, total};

  // The candidates, sorted only as far as the restrictions read. min-p compares with the most
  // likely token's weight, exp(0) = 1: the tokens below that floor are never kept and are left
  // out at once, unless top-k needs all of them for its mass. (The first token is kept whatever
  // the floor: a min_p above 1 keeps the first of those of weight 1.)
  const double floor = options_.min_p > 0.0f ? (double)options_.min_p : 0.0;
  order_.clear();
  if (limit < V) {
    order_.resize(V);
    std::iota(order_.begin(), order_.end(), 0);
  } else {
    // Only tokens of weight ≥ lowest can be kept: min-p's floor, and under top-p the bottom of
    // the weights' binary exponent (their bits order as they do) where the mass from the top
    // reaches top_p of the total (the nucleus lies above it; the margin covers summing in another
    // order than the walk's). Bins in 4 interleaved copies, so that adds to one bin do not wait
    // on each other.
    float lowest = (float)std::min(floor, 1.0);
    if (nucleus) {
      double bin_mass[4][256] = {};
      for (int i = 0; i < V; ++i) bin_mass[i & 3][std::bit_cast<uint32_t>(w[i]) >> 23] += w[i];
      double mass = 0;
      int bin = 255;
      for (; bin > 0; --bin) {
        mass += (bin_mass[0][bin] + bin_mass[1][bin]) + (bin_mass[2][bin] + bin_mass[3][bin]);
        if (mass >= options_.top_p * total * (1 + 1e-9)) break;
      }
      lowest = std::max(lowest, std::bit_cast<float>((uint32_t)bin << 23));
    }
    for (int i = 0; i < V; ++i)
      if (w[i] >= lowest) order_.push_back(i);
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
  const double target = options_.top_p * limit_mass;
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
  if (options_.greedy()) return argmax(logits, V);
  const SamplerCandidates c = candidates(logits, V);
  double r = next_uniform() * c.mass;
  // The first token whose running mass passes r (unrestricted: first the block it lies in);
  // rounding can leave r at or past the sum, then the last token of positive weight (none in
  // the block: the most likely).
  int begin = 0, end = c.n;
  if (!c.ids) {
    int k = 0;
    const int blocks = (int)block_mass_.size();
    while (k + 1 < blocks && r >= block_mass_[k]) r -= block_mass_[k++];
    begin = k * kBlock;
    end = std::min(V, begin + kBlock);
  }
  double running = 0;
  int32_t last = -1;
  for (int i = begin; i < end; ++i) {
    const int32_t id = c.ids ? c.ids[i] : i;
    if (c.weight[id] <= 0) continue;
    running += c.weight[id];
    last = id;
    if (r < running) return id;
  }
  return last >= 0 ? last : (c.ids ? c.ids[0] : argmax(logits, V));
}

}  // namespace golinear::runtime
