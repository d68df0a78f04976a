// Next-token choice: greedy at temperature 0, else temperature sampling from a seeded generator
// (the same seed gives the same text on every platform), restricted as vLLM and llama.cpp do by
// top-k (the k most likely tokens), top-p (nucleus: the smallest set whose mass reaches top_p)
// and min-p (tokens with at least min_p times the probability of the most likely one), applied
// in that order to the tempered distribution.
//
// The cost is O(V) plus a sort of what the restrictions read: with none (the request defaults)
// the draw walks the tokens in id order, never sorting; with top-p or min-p only the tokens that
// can be kept are gathered (by weight's binary exponent) and only the prefix that decides the set
// is sorted (64, 256, 1024, … tokens); with top-k the k kept. Weights are float e^x within 2 ulp
// (a vectorized exp), their sums double. The unrestricted draw walks in id order, the restricted
// ones most likely first: the same distribution as any order, but a seed's tokens at the
// defaults differ from versions before 2026-12 (which walked the sorted order).
#pragma once

#include <cstdint>
#include <vector>

namespace golinear::runtime {

struct SamplerOptions {
  float temperature = 0.0f;  // 0: greedy (argmax, first index on ties)
  float top_p = 1.0f;        // keep the smallest set of tokens whose mass reaches top_p; ≥ 1: all
  uint64_t seed = 0;
  int top_k = 0;       // keep the k most likely tokens; 0: all
  float min_p = 0.0f;  // keep tokens with p ≥ min_p · p_max; 0: all
  // The choice is the argmax (no draw): what a backend can compute on its device.
  bool greedy() const { return temperature <= 0.0f; }
};

// What a draw chooses from: the weights of all tokens and the kept ones.
struct SamplerCandidates {
  const float* weight = nullptr;  // (V) exp((logit − max logit) / temperature); the max's is 1
  // (n) the kept token ids, most likely first (equal weights: lower id first); null: every token
  // is kept (no restriction applies), in id order, n = V.
  const int32_t* ids = nullptr;
  int n = 0;
  double mass = 0;  // the kept tokens' summed weight
};

class Sampler {
 public:
  explicit Sampler(SamplerOptions options) : options_(options), state_(options.seed * 2 + 1) {}
  // logits (V) → chosen token id. One draw of the generator per call at temperature > 0.
  int32_t sample(const float* logits, int V);

  // What sample draws from at temperature > 0 (the options' top-k, then top-p of the top-k's
  // mass, then min-p): the sorted definition's set exactly, the prefix read in order of weight
  // and ties by lower id. Points into this sampler's buffers, valid until its next call.
  SamplerCandidates candidates(const float* logits, int V);

 private:
  double next_uniform();  // splitmix64 → [0, 1)
  // Sorts order_[begin, end) most likely first, having put there the tokens that come there in
  // the sorted order of order_[begin, size).
  void sort_range(int begin, int end);
  static constexpr int kBlock = 256;
  SamplerOptions options_;
  uint64_t state_;
  std::vector<double> block_mass_;  // (V / kBlock) the weights' sums over blocks of kBlock tokens
  std::vector<float> weight_;       // (V) scratch, reused between calls
  std::vector<int32_t> order_;      // (≤ V) scratch: candidate ids
};

int32_t argmax(const float* values, int n);

}  // namespace golinear::runtime
