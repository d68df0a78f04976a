// Full causal attention forward and backward on Hopper's warpgroup MMA and tensor copies (attention_wgmma.cu),
// the path attention_forward takes where it applies; internal to kernels/cuda (attention.h is
// the interface, kernels/cpu/attention.h the specification).
#pragma once

#include "kernels/cuda/attention.h"

namespace golinear::kernels::cuda::detail {

// Full causal (no sink + window mask), D ∈ {64, 128}: forward and backward.
bool attention_wgmma_applies(int D, AttentionMaskSpec mask);

// attention_forward for those cases: y (T, H, D), lse (T, H) or null.
Status attention_forward_wgmma(bf16* y, float* lse, const bf16* q, const bf16* k, const bf16* v,
                               int T, int H, int G, int D, cudaStream_t stream);

// attention_backward for the same cases, after its prepare step (dob = bf16(dy), dsum (T, H) as
// there); lse (T, H) from the forward. dq, dk, dv WRITTEN.
Status attention_backward_wgmma(float* dq, float* dk, float* dv, const bf16* q, const bf16* k,
                                const bf16* v, const bf16* dob, const float* lse,
                                const float* dsum, int T, int H, int G, int D,
                                cudaStream_t stream);

}  // namespace golinear::kernels::cuda::detail
