// The random source of the synthetic tasks and of bootstrap standard errors: splitmix64, so a
// seed gives the same samples on every platform and standard library (std::*_distribution
// does not guarantee that).
#pragma once

#include <cstdint>
#include <string>

namespace golinear::eval {

class SyntheticRandom {
 public:
  explicit SyntheticRandom(uint64_t seed) : state_(seed ^ 0x9E3779B97F4A7C15ull) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) for n > 0 (rejection sampling, no modulo bias).
  uint64_t uniform_index(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = next();
    while (x >= limit);
    return x % n;
  }
  // Uniform in [lo, hi].
  long uniform_int(long lo, long hi) { return lo + (long)uniform_index((uint64_t)(hi - lo + 1)); }

 private:
  uint64_t state_;
};

}  // namespace golinear::eval
