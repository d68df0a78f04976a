// RMSNorm (bf16 and fp32 input, and its input gradient) and unit-norm rows (norm.h).
// Row kernels: one block (RMSNorm) or one warp (unit rows) per row.
#include "kernels/cuda/norm.h"

#include <cmath>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.h"

namespace golinear::kernels::cuda {

namespace {

using device::block_sum;
using device::grid_for;

constexpr int kThreads = 256;  // rmsnorm_backward_kernel's block
constexpr float kUnitNormEps = 1e-6f;

__global__ void rmsnorm_kernel(bf16* out, const bf16* x, const float* w, int C, float eps) {
  __shared__ float scratch[32];
  const long n = blockIdx.x;
  float ss = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const float a = __bfloat162float(x[n * C + c]);
    ss += a * a;
  }
  const float inv = rsqrtf(device::block_sum(ss, scratch) / C + eps);
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    out[n * C + c] = __float2bfloat16(__bfloat162float(x[n * C + c]) * inv * w[c]);
}

// One block per row. kVec > 0: the row as kVec float4s a thread (C % 4 == 0, C ≤ 1024·kVec,
// 16-byte aligned), loaded before the sum and held in registers for the scaling (the decode
// step's norms: one row, where the strided loop's dependent loads were its whole time); kVec = 0:
// any C, the row read twice. A programmatic dependent (launch.h; the weights are read before
// pdl_wait) that starts the next kernel at once (the GEMV that reads this output is resident and
// waiting when it ends).
template <int kVec>
__global__ void rmsnorm_f32_kernel(bf16* out, const float* x, const float* w, int C, float eps) {
  __shared__ float scratch[32];
  device::pdl_trigger();
  const float* row = x + (long)blockIdx.x * C;
  bf16* o = out + (long)blockIdx.x * C;
  if constexpr (kVec > 0) {
    const int C4 = C / 4;
    float4 xv[kVec], wv[kVec];
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      const int c4 = threadIdx.x + i * blockDim.x;
      wv[i] = c4 < C4 ? reinterpret_cast<const float4*>(w)[c4] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    device::pdl_wait();
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      const int c4 = threadIdx.x + i * blockDim.x;
      xv[i] = c4 < C4 ? reinterpret_cast<const float4*>(row)[c4] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int i = 0; i < kVec; ++i) ss += xv[i].x * xv[i].x + xv[i].y * xv[i].y + xv[i].z * xv[i].z + xv[i].w * xv[i].w;
    const float r = rsqrtf(block_sum(ss, scratch) / C + eps);
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      const int c4 = threadIdx.x + i * blockDim.x;
      if (c4 >= C4) continue;
      __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(o + 4 * c4);
      dst[0] = __floats2bfloat162_rn(xv[i].x * r * wv[i].x, xv[i].y * r * wv[i].y);
      dst[1] = __floats2bfloat162_rn(xv[i].z * r * wv[i].z, xv[i].w * r * wv[i].w);
    }
  } else {
    device::pdl_wait();
    float ss = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) ss += row[c] * row[c];
    ss = block_sum(ss, scratch);
    const float r = rsqrtf(ss / C + eps);
    for (int c = threadIdx.x; c < C; c += blockDim.x) o[c] = __float2bfloat16(row[c] * r * w[c]);
  }
}

__global__ void rmsnorm_backward_kernel(float* dx, bool accumulate, const float* dy,
                                        const float* x, const float* w, int C, float eps) {
  __shared__ double shared[kThreads / 32];
  const long row = blockIdx.x;
  const float* xr = x + row * C;
  const float* gr = dy + row * C;
  float* out = dx + row * C;
  double ss = 0, dot = 0;
  for (int c = threadIdx.x; c < C; c += kThreads) {
    ss += (double)xr[c] * xr[c];
    dot += (double)gr[c] * w[c] * xr[c];
  }
  ss = block_sum(ss, shared);
  dot = block_sum(dot, shared);
  const double inv = 1.0 / sqrt(ss / C + (double)eps);
  const double k = inv * inv * inv / C * dot;
  for (int c = threadIdx.x; c < C; c += kThreads) {
    const float g = (float)(inv * gr[c] * w[c] - k * xr[c]);
    out[c] = accumulate ? out[c] + g : g;
  }
}

// One warp per row.
__global__ void unit_rows_forward_kernel(bf16* out, const bf16* in, long rows, int D) {
  const long row = (blockIdx.x * (long)blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  float ss = 0.0f;
  for (int d = lane; d < D; d += 32) {
    const float a = __bfloat162float(in[row * D + d]);
    ss += a * a;
  }
  const float inv = rsqrtf(device::warp_sum(ss) + kUnitNormEps);
  for (int d = lane; d < D; d += 32) out[row * D + d] = __float2bfloat16(__bfloat162float(in[row * D + d]) * inv);
}

__global__ void unit_rows_backward_kernel(float* din, const float* dout, const bf16* in, long rows,
                                          int D) {
  const long row = (blockIdx.x * (long)blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  float ss = 0.0f, ad = 0.0f;
  for (int d = lane; d < D; d += 32) {
    const float a = __bfloat162float(in[row * D + d]);
    ss += a * a;
    ad += a * dout[row * D + d];
  }
  const float inv = rsqrtf(device::warp_sum(ss) + kUnitNormEps);
  const float proj = device::warp_sum(ad) * inv * inv * inv;
  for (int d = lane; d < D; d += 32)
    din[row * D + d] = inv * dout[row * D + d] - proj * __bfloat162float(in[row * D + d]);
}

}  // namespace

Status rmsnorm_forward(bf16* out, const bf16* x, const float* w, int N, int C, float eps,
                       cudaStream_t stream) {
  rmsnorm_kernel<<<N, 256, 0, stream>>>(out, x, w, C, eps);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status rmsnorm_f32_forward(bf16* out, const float* x, const float* w, int N, int C, float eps,
                           cudaStream_t stream) {
  if (N <= 0) return ok_status();
  // The same arrangement for every N (a row's bits do not depend on how many rows are normed).
  const bool vec = C % 4 == 0 && ((reinterpret_cast<size_t>(out) | reinterpret_cast<size_t>(x) |
                                   reinterpret_cast<size_t>(w)) & 15) == 0;
  const int per = (C / 4 + 255) / 256;  // float4s a thread
  auto* kernel = !vec      ? rmsnorm_f32_kernel<0>
                 : per <= 1 ? rmsnorm_f32_kernel<1>
                 : per <= 2 ? rmsnorm_f32_kernel<2>
                 : per <= 4 ? rmsnorm_f32_kernel<4>
                 : per <= 8 ? rmsnorm_f32_kernel<8>
                            : rmsnorm_f32_kernel<0>;
  GL_CUDA_CHECK(launch_dependent(kernel, (unsigned)N, 256, 0, stream, out, x, w, C, eps));
  return ok_status();
}

Status rmsnorm_backward_f32(float* dx, bool accumulate, const float* dy, const float* x,
                            const float* w, int N, int C, float eps, cudaStream_t stream) {
  if (N <= 0) return ok_status();
  rmsnorm_backward_kernel<<<N, kThreads, 0, stream>>>(dx, accumulate, dy, x, w, C, eps);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status unit_rows_forward(bf16* out, const bf16* in, long rows, int D, cudaStream_t stream) {
  unit_rows_forward_kernel<<<grid_for(rows * 32, 256), 256, 0, stream>>>(out, in, rows, D);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status unit_rows_backward(float* din, const float* dout, const bf16* in, long rows, int D,
                          cudaStream_t stream) {
  unit_rows_backward_kernel<<<grid_for(rows * 32, 256), 256, 0, stream>>>(din, dout, in, rows, D);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

}  // namespace golinear::kernels::cuda
