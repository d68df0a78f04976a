// RMSNorm and unit-norm rows on the GPU, forward and backward side by side.
// CPU reference: kernels/cpu/norm.h (rmsnorm, rmsnorm_backward); unit rows as
// mixers/hybrid_mixer.cpp normalizes keys and queries (eps 1e-6 inside the root).
// Gradient convention as in cuda_common.h: WRITTEN (=) unless the comment says "+=".
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_common.h"

namespace golinear::kernels::cuda {

// RMSNorm: out (N, C) bf16 = x / sqrt(mean x² + eps) · w, fp32 inside.
Status rmsnorm_forward(bf16* out, const bf16* x, const float* w, int N, int C, float eps,
                       cudaStream_t stream);

// out (N, C) bf16 = x / sqrt(mean x² + eps) · w; x (N, C) fp32, w (C) fp32.
Status rmsnorm_f32_forward(bf16* out, const float* x, const float* w, int N, int C, float eps,
                           cudaStream_t stream);

// RMSNorm's input gradient, y = x / sqrt(mean x² + eps) · w over rows of C:
//   dx = inv·dy·w − inv³/C · x · Σ_c dy_c w_c x_c,  inv = 1/sqrt(mean x² + eps)
// dx, dy, x (N, C) fp32, w (C) fp32. accumulate: dx += (else =). Row sums in fp64 like the CPU.
Status rmsnorm_backward_f32(float* dx, bool accumulate, const float* dy, const float* x,
                            const float* w, int N, int C, float eps, cudaStream_t stream);

// out (rows, D) = in / sqrt(‖in‖² + 1e-6), bf16 → bf16.
Status unit_rows_forward(bf16* out, const bf16* in, long rows, int D, cudaStream_t stream);
// din (rows, D) fp32 (=) from dout (rows, D) fp32.
Status unit_rows_backward(float* din, const float* dout, const bf16* in, long rows, int D,
                          cudaStream_t stream);

}  // namespace golinear::kernels::cuda
