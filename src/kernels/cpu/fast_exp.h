// A vectorizable e^x for the fast fp32 kernels (attention softmax, chunk decays) and the
// sampler's weights.
#pragma once

#include <bit>
#include <cstdint>

namespace golinear::kernels::cpu {

// Cephes expf's core, without branches or library calls so that loops over it vectorize (no
// float compare: GCC keeps those as control flow): n = round(x / ln 2) by adding 1.5·2²³
// (`shifted` keeps n in its low mantissa bits), r = x − n·ln 2 in two parts (Cody–Waite), and
// e^r by a degree-5 polynomial on |r| ≤ ln 2 / 2 (≤ 2 ulp). e^x = e_r · 2^n.
struct ExpParts {
  float shifted, n, e_r;
};
inline ExpParts exp_parts(float x) {
  const float shifted = x * 1.44269504088896341f + 12582912.0f;
  const float n = shifted - 12582912.0f;
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return {shifted, n, p * r * r + r + 1.0f};
}

// e^x in fp32 for x ≤ 88; inputs below about −87 give ~1e-38 instead of 0 (the 2^n factor is
// clamped at 2^−126), above 88.7 +inf; NaN and ±inf give NaN. n is clamped to [−126, 128] as
// a float before its conversion to int, which for a NaN or an infinite n is undefined
// behaviour (UBSan: the linearization_weights fuzzer fed weights that overflowed, session 10).
inline float exp_vectorizable(float x) {
  const ExpParts e = exp_parts(x);
  const float n = e.n > -126.0f ? (e.n < 128.0f ? e.n : 128.0f) : -126.0f;  // NaN → −126
  return e.e_r * std::bit_cast<float>(((int)n + 127) << 23);  // e · 2^n
}

// e^x for x ≤ 0, exactly 0 below −87.3 (e^x near FLT_MIN), a −inf (masked) input included; the
// comparisons on the bits, which for x ≤ 0 grow with |x|.
inline float exp_nonpositive(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x), lowest = std::bit_cast<uint32_t>(-87.3f);
  const uint32_t kept = 0u - (uint32_t)(bits <= lowest);  // all ones, or 0 below −87.3
  const ExpParts e = exp_parts(std::bit_cast<float>(bits ^ ((bits ^ lowest) & ~kept)));
  const uint32_t n_plus_bias = std::bit_cast<uint32_t>(e.shifted) - 0x4B400000u + 127u;  // n + 127
  const float two_n = std::bit_cast<float>(n_plus_bias << 23);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(e.e_r * two_n) & kept);
}

}  // namespace golinear::kernels::cpu
