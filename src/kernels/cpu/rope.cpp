#include "kernels/cpu/rope.h"

#include <cmath>

namespace golinear::kernels::cpu {

static void rope_rotate(float* x, const float* inv_freq, int T, int N, int D, long pos0,
                        float sign) {
  const int half = D / 2;
  for (int t = 0; t < T; ++t) {
    for (int i = 0; i < half; ++i) {
      // Angles in float, as transformers computes (inv_freq · position in fp32).
      float angle = (float)(pos0 + t) * inv_freq[i];
      float c = std::cos(angle), s = sign * std::sin(angle);
      for (int n = 0; n < N; ++n) {
        float* v = x + ((long)t * N + n) * D;
        float a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
      }
    }
  }
}

void rope_forward(float* x, const float* inv_freq, int T, int N, int D, long pos0) {
  rope_rotate(x, inv_freq, T, N, D, pos0, 1.0f);
}

void rope_backward(float* dx, const float* inv_freq, int T, int N, int D, long pos0) {
  rope_rotate(dx, inv_freq, T, N, D, pos0, -1.0f);
}

}  // namespace golinear::kernels::cpu
