// Backbone backward kernels (backbone_backward.h). Row kernels: one block of 256 threads per
// row, fp64 block reductions in a fixed order (deterministic).
#include "kernels/cuda/backbone_backward.h"

#include <algorithm>
#include <cmath>

#include "kernels/cuda/device_utils.cuh"

namespace golinear::kernels::cuda {

namespace {

constexpr int kThreads = 256;
constexpr long kMaxBlocks = 65535L * 8;  // grid_for's cap here
using device::grid_for;

// Sum of v over the block (blockDim.x == kThreads), the result in every thread.
__device__ double block_sum(double v, double* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  double total = 0;
  for (int w = 0; w < kThreads / 32; ++w) total += shared[w];
  return total;
}

__device__ float block_max(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float m = shared[0];
  for (int w = 1; w < kThreads / 32; ++w) m = fmaxf(m, shared[w]);
  return m;
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

__global__ void swiglu_backward_kernel(bf16* dgu, const float* dact, const bf16* gu, int T, int F) {
  const long n = (long)T * F;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    const long t = i / F, f = i % F;
    const float z = __bfloat162float(gu[t * 2 * F + f]);
    const float u = __bfloat162float(gu[t * 2 * F + F + f]);
    const float sig = 1.0f / (1.0f + expf(-z));
    const float d = dact[i];
    dgu[t * 2 * F + f] = __float2bfloat16(d * u * sig * (1.0f + z * (1.0f - sig)));
    dgu[t * 2 * F + F + f] = __float2bfloat16(d * z * sig);
  }
}

__global__ void kl_rows_kernel(double* kl, float* dlogits, const float* teacher,
                               const float* student, int V, float scale) {
  __shared__ double shared[kThreads / 32];
  __shared__ float shared_f[kThreads / 32];
  const long row = blockIdx.x;
  const float* a = teacher + row * V;
  const float* b = student + row * V;
  float ma = -INFINITY, mb = -INFINITY;
  for (int i = threadIdx.x; i < V; i += kThreads) {
    ma = fmaxf(ma, a[i]);
    mb = fmaxf(mb, b[i]);
  }
  ma = block_max(ma, shared_f);
  mb = block_max(mb, shared_f);
  double za = 0, zb = 0;
  for (int i = threadIdx.x; i < V; i += kThreads) {
    za += exp((double)a[i] - ma);
    zb += exp((double)b[i] - mb);
  }
  za = block_sum(za, shared);
  zb = block_sum(zb, shared);
  const double lza = log(za), lzb = log(zb);
  double sum = 0;
  for (int i = threadIdx.x; i < V; i += kThreads) {
    const double log_pa = (double)a[i] - ma - lza, log_pb = (double)b[i] - mb - lzb;
    const double pa = exp(log_pa);
    sum += pa * (log_pa - log_pb);
    if (dlogits) dlogits[row * V + i] = (float)((exp(log_pb) - pa) * scale);
  }
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) kl[row] = sum;
}

__global__ void pack_qkv_kernel(bf16* dqkv, const float* dq, const float* dk, const float* dv,
                                int T, int HD, int GD) {
  const int W = HD + 2 * GD;
  const long n = (long)T * W;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    const long t = i / W;
    const int c = (int)(i % W);
    float g;
    if (c < HD) g = dq[t * HD + c];
    else if (c < HD + GD) g = dk[t * GD + c - HD];
    else g = dv[t * GD + c - HD - GD];
    dqkv[i] = __float2bfloat16(g);
  }
}

}  // namespace

Status rmsnorm_backward_f32(float* dx, bool accumulate, const float* dy, const float* x,
                            const float* w, int N, int C, float eps, cudaStream_t stream) {
  if (N <= 0) return ok_status();
  rmsnorm_backward_kernel<<<N, kThreads, 0, stream>>>(dx, accumulate, dy, x, w, C, eps);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status swiglu_stacked_backward(bf16* dgu, const float* dact, const bf16* gu, int T, int F,
                               cudaStream_t stream) {
  swiglu_backward_kernel<<<grid_for((long)T * F, kThreads, kMaxBlocks), kThreads, 0, stream>>>(dgu, dact, gu, T, F);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status kl_rows_forward_backward(double* kl, float* dlogits, const float* teacher,
                                const float* student, int T, int V, float scale,
                                cudaStream_t stream) {
  if (T <= 0) return ok_status();
  kl_rows_kernel<<<T, kThreads, 0, stream>>>(kl, dlogits, teacher, student, V, scale);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status pack_qkv_grad_bf16(bf16* dqkv, const float* dq, const float* dk, const float* dv, int T,
                          int HD, int GD, cudaStream_t stream) {
  pack_qkv_kernel<<<grid_for((long)T * (HD + 2 * GD), kThreads, kMaxBlocks), kThreads, 0, stream>>>(
      dqkv, dq, dk, dv, T, HD, GD);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

}  // namespace golinear::kernels::cuda
