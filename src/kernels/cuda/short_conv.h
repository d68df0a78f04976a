// The causal depthwise short convolution of width 4 on the GPU (identity-initialised on q, k, v;
// DESIGN.md §3), its backward, and the hybrid's fused input stage conv → RoPE / unit norm.
// CPU reference: kernels/cpu/short_conv.h.
// Gradient convention as in cuda_common.h: WRITTEN (=) unless the comment says "+=".
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/cuda_common.h"

namespace golinear::kernels::cuda {

// Causal depthwise conv of width 4: y, x (T, N) bf16, w (N, 4) fp32 (tap 3 = current token).
Status short_conv_forward(bf16* y, const bf16* x, const float* w, int T, int N,
                          cudaStream_t stream);
// dx (T, N) fp32 (=; null: not computed), dw (N, 4) fp32 (+=) from dy (T, N) fp32. Parallel
// over time: the tap gradients of each run of tokens go to the workspace, then are summed in
// run order (deterministic).
size_t short_conv_backward_workspace_bytes(int T, int N);
Status short_conv_backward(float* dx, float* dw, const float* dy, const bf16* x, const float* w,
                           int T, int N, void* workspace, size_t workspace_bytes,
                           cudaStream_t stream);

// short_conv_forward of x (T, heads·D) with taps w (heads·D, 4), then in the same pass any of
// (each may be null): conv_out the conv output, rope_out its RoPE from position 0 (table cs of
// rope_table), unit_out its unit-norm rows; bitwise the arithmetic of short_conv_forward →
// rope_apply / unit_rows_forward. D 64 or 128.
Status conv_rope_unit_forward(bf16* conv_out, bf16* rope_out, bf16* unit_out, const bf16* x,
                              const float* w, const float2* cs, int T, int heads, int D,
                              cudaStream_t stream);

}  // namespace golinear::kernels::cuda
