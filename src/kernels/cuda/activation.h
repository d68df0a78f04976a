// SwiGLU on the GPU: on separate gate and up tensors, and on the stacked [gate; up] output of one
// GEMM (the model's MLP) with its backward. CPU reference: kernels/cpu/activation.h.
// Gradient convention as in cuda_common.h: WRITTEN (=).
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_common.h"

namespace golinear::kernels::cuda {

// SwiGLU: out (N) = silu(gate) ⊙ up, bf16.
Status swiglu_forward(bf16* out, const bf16* gate, const bf16* up, long N, cudaStream_t stream);

// out (T, F) bf16 = silu(gu[:, :F]) ⊙ gu[:, F:]; gu (T, 2F) bf16.
Status swiglu_stacked(bf16* out, const bf16* gu, int T, int F, cudaStream_t stream);

// The backward of swiglu_stacked: from dact (T, F) fp32, dgu (T, 2F) bf16 =
// [dact·up·σ(g)(1 + g(1 − σ(g))) ; dact·silu(g)] (the GEMM operand).
Status swiglu_stacked_backward(bf16* dgu, const float* dact, const bf16* gu, int T, int F,
                               cudaStream_t stream);

}  // namespace golinear::kernels::cuda
