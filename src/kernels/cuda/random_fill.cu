// Deterministic random fills (random_fill.h): a counter-based hash of (index, seed), so the same
// seed gives the same tensor on every device and launch shape.
#include "kernels/cuda/random_fill.h"

#include "kernels/cuda/device_utils.cuh"

namespace golinear::kernels::cuda {

namespace {

__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
__device__ __forceinline__ float unit_uniform(unsigned long long i, unsigned long long seed) {
  const unsigned long long z = mix64(i * 0x9E3779B97F4A7C15ull + seed * 0xD1B54A32D192ED03ull + 1);
  return ((z >> 40) + 0.5f) * (1.0f / 16777216.0f);  // (0, 1)
}

__global__ void fill_normal_bf16_kernel(bf16* p, size_t n, unsigned long long seed, float std) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const float u1 = unit_uniform(2 * i, seed), u2 = unit_uniform(2 * i + 1, seed);
    const float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);  // Box–Muller
    p[i] = __float2bfloat16(std * z);
  }
}
__global__ void fill_uniform_bf16_kernel(bf16* p, size_t n, unsigned long long seed, float lo, float hi) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = __float2bfloat16(lo + (hi - lo) * unit_uniform(i, seed));
}
__global__ void fill_uniform_f32_kernel(float* p, size_t n, unsigned long long seed, float lo, float hi) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = lo + (hi - lo) * unit_uniform(i, seed);
}
__global__ void fill_const_f32_kernel(float* p, size_t n, float value) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = value;
}

}  // namespace

Status fill_normal_bf16(bf16* p, size_t n, uint64_t seed, float std, cudaStream_t stream) {
  fill_normal_bf16_kernel<<<2048, 256, 0, stream>>>(p, n, seed, std);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}
Status fill_uniform_bf16(bf16* p, size_t n, uint64_t seed, float lo, float hi,
                         cudaStream_t stream) {
  fill_uniform_bf16_kernel<<<2048, 256, 0, stream>>>(p, n, seed, lo, hi);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}
Status fill_uniform_f32(float* p, size_t n, uint64_t seed, float lo, float hi,
                        cudaStream_t stream) {
  fill_uniform_f32_kernel<<<2048, 256, 0, stream>>>(p, n, seed, lo, hi);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}
Status fill_const_f32(float* p, size_t n, float value, cudaStream_t stream) {
  fill_const_f32_kernel<<<2048, 256, 0, stream>>>(p, n, value);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

}  // namespace golinear::kernels::cuda
