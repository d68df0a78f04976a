#include "kernels/cpu/activation.h"

#include <cmath>

namespace golinear::kernels::cpu {

void swiglu_forward(float* out, const float* gate, const float* up, long N) {
#pragma omp parallel for schedule(static)
  for (long i = 0; i < N; ++i) {
    const float z = gate[i];
    out[i] = z / (1.0f + std::exp(-z)) * up[i];
  }
}

void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                     const float* up, long N) {
#pragma omp parallel for schedule(static)
  for (long i = 0; i < N; ++i) {
    const float z = gate[i];
    const float sig = 1.0f / (1.0f + std::exp(-z));
    const float silu = z * sig;
    dup[i] += dout[i] * silu;
    dgate[i] += dout[i] * up[i] * sig * (1.0f + z * (1.0f - sig));
  }
}

}  // namespace golinear::kernels::cpu
