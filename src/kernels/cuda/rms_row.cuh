// The RMSNorm of one fp32 row by a block of 256 threads as kVec float4s a thread (C % 4 == 0,
// C ≤ 1024·kVec, 16-byte aligned rows): rmsnorm_f32_kernel's vector form (norm.cu) and the x of
// the GEMV that norms its input as it loads it (gemm.cu, gemm_nt_rmsnorm). One code for both:
// the same bits whichever kernel norms a row.
#pragma once

#include "kernels/cuda/device_utils.cuh"

namespace golinear::kernels::cuda::device {

template <int kVec>
struct RmsRow {
  float4 x[kVec], w[kVec];

  // Float4 i of this thread: column 4·(threadIdx.x + 256·i) (C4 = C / 4 float4s a row).
  __device__ __forceinline__ static int at(int i) { return threadIdx.x + i * 256; }

  __device__ __forceinline__ void load_weights(const float* wt, int C4) {
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      w[i] = at(i) < C4 ? reinterpret_cast<const float4*>(wt)[at(i)] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  __device__ __forceinline__ void load_row(const float* row, int C4) {
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      x[i] = at(i) < C4 ? reinterpret_cast<const float4*>(row)[at(i)] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  // 1 / sqrt(mean(x²) + eps): each thread's squares in order, then block_sum (every thread of the
  // block takes part; `scratch` 32 floats).
  __device__ __forceinline__ float inv_rms(int C, float eps, float* scratch) const {
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      ss += x[i].x * x[i].x + x[i].y * x[i].y + x[i].z * x[i].z + x[i].w * x[i].w;
    return rsqrtf(block_sum(ss, scratch) / C + eps);
  }
  // bf16(x · r · w) of float4 i: its four values packed as two bf16 pairs.
  __device__ __forceinline__ uint2 scaled(int i, float r) const {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(x[i].x * r * w[i].x, x[i].y * r * w[i].y);
    const __nv_bfloat162 hi = __floats2bfloat162_rn(x[i].z * r * w[i].z, x[i].w * r * w[i].w);
    return make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
  }
};

}  // namespace golinear::kernels::cuda::device
