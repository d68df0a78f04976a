#include "kernels/cpu/norm.h"

#include <cmath>

namespace golinear::kernels::cpu {

void rmsnorm_forward(float* out, const float* x, const float* w, int N, int C, float eps) {
  for (int n = 0; n < N; ++n) {
    const float* xr = x + (long)n * C;
    float* yr = out + (long)n * C;
    float ss = 0.0f;
    for (int c = 0; c < C; ++c) ss += xr[c] * xr[c];
    float inv = 1.0f / std::sqrt(ss / C + eps);
    for (int c = 0; c < C; ++c) yr[c] = xr[c] * inv * w[c];
  }
}

void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w,
                      int N, int C, float eps) {
  for (int n = 0; n < N; ++n) {
    const float* xr = x + (long)n * C;
    const float* gr = dout + (long)n * C;
    double ss = 0.0;
    for (int c = 0; c < C; ++c) ss += (double)xr[c] * xr[c];
    double inv = 1.0 / std::sqrt(ss / C + eps);
    // y_c = x_c·inv·w_c;  ∂L/∂x_i = inv·g_i w_i − inv³/C · x_i · Σ_c g_c w_c x_c
    double dot = 0.0;
    for (int c = 0; c < C; ++c) dot += (double)gr[c] * w[c] * xr[c];
    for (int c = 0; c < C; ++c) {
      dx[(long)n * C + c] += (float)(inv * gr[c] * w[c] - inv * inv * inv / C * xr[c] * dot);
      if (dw) dw[c] += (float)(gr[c] * xr[c] * inv);
    }
  }
}

}  // namespace golinear::kernels::cpu
