// The decode cache of a hybrid layer after a prefill, for the whole model on the GPU
// (model/cuda/gpu_model.h). The generic whole-model ops live in their families' files: norm.h,
// embedding.h, activation.h, elementwise.h, random_fill.h.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/hybrid.h"

namespace golinear::kernels::cuda {

// After hybrid_forward over T tokens from position 0 (which wrote cache.state as its
// state_final, or left it zero when T ≤ sinks + window), fills the rest of a zeroed hybrid
// cache as T hybrid_decode_step calls would have: conv rows of the last 3 raw tokens, RoPE'd
// conv'd keys / conv'd values of the sinks and of the last window + 1 tokens, their unit keys and
// gates (g, β from x), and the device position T. x (T, C), q (T, H, D), k, v (T, G, D) bf16 as
// given to hybrid_forward. D = 64 or 128.
Status hybrid_cache_fill(const HybridCacheView& cache, const HybridShape& shape,
                         const HybridParams& params, const bf16* x, const bf16* q, const bf16* k,
                         const bf16* v, int T, cudaStream_t stream);

}  // namespace golinear::kernels::cuda
