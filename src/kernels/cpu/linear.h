// Dense layers on the CPU. Gradient convention for every backward in kernels/cpu: parameter
// gradients accumulate (+=), activation gradients accumulate (+=) too, so callers zero them once.
#pragma once

namespace golinear::kernels::cpu {

// out (T, N) = x (T, K) · wᵀ + bias, with w (N, K) row-major as in Hugging Face, bias (N) or null.
void linear_forward(float* out, const float* x, const float* w, const float* bias, int T, int K,
                    int N);

// dx (T, K) += dout (T, N) · w;  dw (N, K) += doutᵀ · x (if dw);  dbias (N) += Σ_t dout (if dbias).
void linear_backward(float* dx, float* dw, float* dbias, const float* dout, const float* x,
                     const float* w, int T, int K, int N);

// The plain triple loop, the specification the BLAS path is tested against.
void linear_forward_reference(float* out, const float* x, const float* w, const float* bias, int T,
                              int K, int N);

}  // namespace golinear::kernels::cpu
