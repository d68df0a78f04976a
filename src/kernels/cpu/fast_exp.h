// A vectorizable e^x for the fast fp32 kernels (attention softmax, chunk decays).
#pragma once

#include <bit>

namespace golinear::kernels::cpu {

// e^x in fp32 for x ≤ 88 (Cephes expf: Cody–Waite reduction, degree-5 polynomial; ≤ 2 ulp),
// written without branches or library calls so that loops over it vectorize (no float compare:
// GCC keeps those as control flow). Round to nearest by the 1.5·2²³ trick; inputs below about
// −87 give ~1e-38 instead of 0 (the 2^n factor is clamped at 2^−126); NaN and ±inf unsupported.
inline float exp_vectorizable(float x) {
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  int exponent = (int)n;
  exponent = exponent > -126 ? exponent : -126;
  return e * std::bit_cast<float>((exponent + 127) << 23);  // e · 2^n
}

}  // namespace golinear::kernels::cpu
