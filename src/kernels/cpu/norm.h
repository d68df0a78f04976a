// RMSNorm as Hugging Face computes it: in fp32, y = x / sqrt(mean(x²) + eps) · w.
#pragma once

namespace golinear::kernels::cpu {

// out (N, C) = rmsnorm(x (N, C)) · w (C). `out` may alias `x`.
void rmsnorm_forward(float* out, const float* x, const float* w, int N, int C, float eps);

// dx (N, C) += ∂L/∂x;  dw (C) += ∂L/∂w (if dw).
void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w,
                      int N, int C, float eps);

}  // namespace golinear::kernels::cpu
