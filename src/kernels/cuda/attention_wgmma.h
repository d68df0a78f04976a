// Full causal attention forward on Hopper's warpgroup MMA and tensor copies (attention_wgmma.cu),
// the path attention_forward takes where it applies; internal to kernels/cuda (attention.h is
// the interface, kernels/cpu/attention.h the specification).
#pragma once

#include "kernels/cuda/attention.h"

namespace golinear::kernels::cuda::detail {

// Full causal (no sink + window mask), D ∈ {64, 128}.
bool attention_forward_wgmma_applies(int D, AttentionMaskSpec mask);

// attention_forward for those cases: y (T, H, D), lse (T, H) or null.
Status attention_forward_wgmma(bf16* y, float* lse, const bf16* q, const bf16* k, const bf16* v,
                               int T, int H, int G, int D, cudaStream_t stream);

}  // namespace golinear::kernels::cuda::detail
