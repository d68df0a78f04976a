// Deterministic random fills on the GPU (random-weight models of a given shape for benchmarks and
// tests): a counter-based hash of (index, seed), the same values on every device.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_common.h"

namespace golinear::kernels::cuda {

Status fill_normal_bf16(bf16* p, size_t n, uint64_t seed, float std, cudaStream_t stream);
Status fill_uniform_bf16(bf16* p, size_t n, uint64_t seed, float lo, float hi,
                         cudaStream_t stream);
Status fill_uniform_f32(float* p, size_t n, uint64_t seed, float lo, float hi,
                        cudaStream_t stream);
Status fill_const_f32(float* p, size_t n, float value, cudaStream_t stream);

}  // namespace golinear::kernels::cuda
