// The token embedding on the GPU: rows of the (bf16) table into the fp32 residual stream.
// CPU reference: model/transformer.cpp (the embedding lookup).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_common.h"

namespace golinear::kernels::cuda {

// h (T, C) fp32 = embed[ids[t]] (embed (V, C) bf16, ids (T) int32 on the device).
Status embed_gather(float* h, const bf16* embed, const int32_t* ids, int T, int C,
                    cudaStream_t stream);

}  // namespace golinear::kernels::cuda
