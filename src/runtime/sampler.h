// Next-token choice: greedy at temperature 0, else temperature + nucleus (top-p) sampling from
// a seeded generator (the same seed gives the same text on every platform).
#pragma once

#include <cstdint>

namespace golinear::runtime {

struct SamplerOptions {
  float temperature = 0.0f;  // 0: greedy (argmax, first index on ties)
  float top_p = 1.0f;        // keep the smallest set of tokens whose mass reaches top_p
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(SamplerOptions options) : options_(options), state_(options.seed * 2 + 1) {}
  // logits (V) → chosen token id.
  int32_t sample(const float* logits, int V);

 private:
  double next_uniform();  // splitmix64 → [0, 1)
  SamplerOptions options_;
  uint64_t state_;
};

int32_t argmax(const float* values, int n);

}  // namespace golinear::runtime
