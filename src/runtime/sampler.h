// Next-token choice: greedy at temperature 0, else temperature sampling from a seeded generator
// (the same seed gives the same text on every platform), restricted as vLLM and llama.cpp do by
// top-k (the k most likely tokens), top-p (nucleus: the smallest set whose mass reaches top_p)
// and min-p (tokens with at least min_p times the probability of the most likely one), applied
// in that order to the tempered distribution.
#pragma once

#include <cstdint>

namespace golinear::runtime {

struct SamplerOptions {
  float temperature = 0.0f;  // 0: greedy (argmax, first index on ties)
  float top_p = 1.0f;        // keep the smallest set of tokens whose mass reaches top_p
  uint64_t seed = 0;
  int top_k = 0;             // keep the k most likely tokens; 0: all
  float min_p = 0.0f;        // keep tokens with p ≥ min_p · p_max; 0: all
};

class Sampler {
 public:
  explicit Sampler(SamplerOptions options) : options_(options), state_(options.seed * 2 + 1) {}
  // logits (V) → chosen token id. One draw of the generator per call at temperature > 0.
  int32_t sample(const float* logits, int V);

 private:
  double next_uniform();  // splitmix64 → [0, 1)
  SamplerOptions options_;
  uint64_t state_;
};

int32_t argmax(const float* values, int n);

}  // namespace golinear::runtime
