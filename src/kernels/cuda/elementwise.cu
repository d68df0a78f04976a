// Elementwise, layout and conversion helpers between the ops (elementwise.h): fp32 → bf16,
// adds, the q/k/v split and its gradient's packing, argmax over rows.
#include "kernels/cuda/elementwise.h"

#include <cfloat>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.h"

namespace golinear::kernels::cuda {

namespace {

using device::grid_for;
using device::warp_sum;

constexpr int kThreads = 256;

__global__ void f32_to_bf16_kernel(bf16* out, const float* in, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x)
    out[i] = __float2bfloat16(in[i]);
}
__global__ void add_f32_kernel(float* a, const float* b, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x)
    a[i] += b[i];
}

__global__ void scaled_block_to_bf16_kernel(bf16* dst, int ld_dst, const float* src, int R, int N,
                                            float scale) {
  const long n = (long)R * N;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x)
    dst[(i / N) * ld_dst + i % N] = __float2bfloat16(scale * src[i]);
}

__global__ void add_scaled_block_f32_kernel(float* dst, const float* src, int ld_src, int R, int N,
                                            float scale) {
  const long n = (long)R * N;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x)
    dst[i] += scale * src[(i / N) * ld_src + i % N];
}

__global__ void split_bf16_pair_kernel(bf16* hi, bf16* lo, const float* x, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x) {
    const bf16 h = __float2bfloat16(x[i]);
    hi[i] = h;
    lo[i] = __float2bfloat16(x[i] - __bfloat162float(h));
  }
}

__global__ void add_bias_rows_kernel(float* x, const float* b, int T, int N) {
  const long n = (long)T * N;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
    x[i] += b[i % N];
}

// One warp per (token, head row) of the stacked output: rows 0..H-1 q, H..H+G-1 k, then v. A
// programmatic dependent (launch.h: of the qkv GEMV in the decode step).
__global__ void qkv_split_kernel(bf16* q, bf16* k, bf16* v, const float* qkv, const float* bias,
                                 const float* q_norm, const float* k_norm, int T, int H, int G,
                                 int D, float eps) {
  device::pdl_wait();
  const int lane = threadIdx.x % 32;
  const int R = H + 2 * G;
  const long warps_total = (long)gridDim.x * blockDim.x / 32;
  for (long warp = (blockIdx.x * (long)blockDim.x + threadIdx.x) / 32; warp < (long)T * R;
       warp += warps_total) {
    const long t = warp / R;
    const int r = (int)(warp % R);
    const int W = R * D;
    const float* src = qkv + t * W + (long)r * D;
    const float* b = bias ? bias + (long)r * D : nullptr;
    float vals[8];
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int d = lane + 32 * i;
      float x = 0.0f;
      if (d < D) {
        x = src[d] + (b ? b[d] : 0.0f);
        ss += x * x;
      }
      vals[i] = x;
    }
    const float* nw = nullptr;
    bf16* dst;
    if (r < H) {
      nw = q_norm;
      dst = q + (t * H + r) * D;
    } else if (r < H + G) {
      nw = k_norm;
      dst = k + (t * G + (r - H)) * D;
    } else {
      dst = v + (t * G + (r - H - G)) * D;
    }
    float scale = 1.0f;
    if (nw) scale = rsqrtf(warp_sum(ss) / D + eps);  // nw is uniform across the warp
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int d = lane + 32 * i;
      if (d < D) dst[d] = __float2bfloat16(nw ? vals[i] * scale * nw[d] : vals[i]);
    }
  }
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

// One block (kArgmaxThreads) per row; the first index of the largest value (NaN never wins). A
// thread scans its float4s (16-byte rows: V % 4 == 0, aligned) kArgmaxUnroll at a time, their
// loads issued together (the strided scalar loop of a 128K vocabulary was 500 dependent loads),
// then the block reduces (value, index) pairs.
constexpr int kArgmaxThreads = 1024, kArgmaxUnroll = 8;
__device__ __forceinline__ void argmax_take(float& bv, int& bi, float v, int i) {
  if (v > bv || (v == bv && i < bi)) bv = v, bi = i;
}
__global__ void __launch_bounds__(kArgmaxThreads) argmax_rows_kernel(int32_t* out, const float* x, int V, bool vec) {
  __shared__ float best_v[kArgmaxThreads / 32];
  __shared__ int best_i[kArgmaxThreads / 32];
  const float* row = x + (long)blockIdx.x * V;
  float bv = -FLT_MAX;
  int bi = 0x7fffffff;
  if (vec) {
    const float4* r4 = reinterpret_cast<const float4*>(row);
    const int V4 = V / 4;
    for (int base = threadIdx.x; base < V4; base += kArgmaxThreads * kArgmaxUnroll) {
      float4 v[kArgmaxUnroll];
#pragma unroll
      for (int u = 0; u < kArgmaxUnroll; ++u) {
        const int i4 = base + u * kArgmaxThreads;
        v[u] = i4 < V4 ? r4[i4] : make_float4(-FLT_MAX, -FLT_MAX, -FLT_MAX, -FLT_MAX);
      }
#pragma unroll
      for (int u = 0; u < kArgmaxUnroll; ++u) {
        const int i = 4 * (base + u * kArgmaxThreads);
        argmax_take(bv, bi, v[u].x, i), argmax_take(bv, bi, v[u].y, i + 1);
        argmax_take(bv, bi, v[u].z, i + 2), argmax_take(bv, bi, v[u].w, i + 3);
      }
    }
  } else {
    for (int i = threadIdx.x; i < V; i += kArgmaxThreads) argmax_take(bv, bi, row[i], i);
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    argmax_take(bv, bi, ov, oi);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) best_v[warp] = bv, best_i[warp] = bi;
  __syncthreads();
  if (warp == 0) {
    bv = lane < kArgmaxThreads / 32 ? best_v[lane] : -FLT_MAX;
    bi = lane < kArgmaxThreads / 32 ? best_i[lane] : 0x7fffffff;
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      argmax_take(bv, bi, ov, oi);
    }
    if (lane == 0) out[blockIdx.x] = bi == 0x7fffffff ? 0 : bi;
  }
}

}  // namespace

Status convert_f32_to_bf16(bf16* out, const float* in, long n, cudaStream_t stream) {
  f32_to_bf16_kernel<<<grid_for(n, 256), 256, 0, stream>>>(out, in, n);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status add_f32(float* a, const float* b, long n, cudaStream_t stream) {
  add_f32_kernel<<<grid_for(n, 256), 256, 0, stream>>>(a, b, n);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status scaled_block_to_bf16(bf16* dst, int ld_dst, const float* src, int R, int N, float scale,
                            cudaStream_t stream) {
  const long n = (long)R * N;
  if (n == 0) return ok_status();
  scaled_block_to_bf16_kernel<<<grid_for(n, 256), 256, 0, stream>>>(dst, ld_dst, src, R, N, scale);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status add_scaled_block_f32(float* dst, const float* src, int ld_src, int R, int N, float scale,
                            cudaStream_t stream) {
  const long n = (long)R * N;
  if (n == 0) return ok_status();
  add_scaled_block_f32_kernel<<<grid_for(n, 256), 256, 0, stream>>>(dst, src, ld_src, R, N, scale);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status split_f32_to_bf16_pair(bf16* hi, bf16* lo, const float* x, long n, cudaStream_t stream) {
  split_bf16_pair_kernel<<<grid_for(n, 256), 256, 0, stream>>>(hi, lo, x, n);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status add_bias_rows(float* x, const float* b, int T, int N, cudaStream_t stream) {
  add_bias_rows_kernel<<<grid_for((long)T * N, 256), 256, 0, stream>>>(x, b, T, N);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status qkv_split(bf16* q, bf16* k, bf16* v, const float* qkv, const float* bias,
                 const float* q_norm, const float* k_norm, int T, int H, int G, int D, float eps,
                 cudaStream_t stream) {
  if (D > 256) return make_error("qkv_split: head dim ", D, " > 256");
  if ((q_norm == nullptr) != (k_norm == nullptr))
    return make_error("qkv_split: q_norm and k_norm go together");
  const long warps = (long)T * (H + 2 * G);
  GL_CUDA_CHECK(launch_dependent(qkv_split_kernel, grid_for(warps * 32, 256), 256, 0, stream, q, k,
                                 v, qkv, bias, q_norm, k_norm, T, H, G, D, eps));
  return ok_status();
}

Status pack_qkv_grad_bf16(bf16* dqkv, const float* dq, const float* dk, const float* dv, int T,
                          int HD, int GD, cudaStream_t stream) {
  pack_qkv_kernel<<<grid_for((long)T * (HD + 2 * GD), kThreads), kThreads, 0, stream>>>(
      dqkv, dq, dk, dv, T, HD, GD);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status argmax_rows(int32_t* out, const float* x, int R, int V, cudaStream_t stream) {
  if (R <= 0) return ok_status();
  const bool vec = V % 4 == 0 && (reinterpret_cast<size_t>(x) & 15) == 0;
  argmax_rows_kernel<<<R, kArgmaxThreads, 0, stream>>>(out, x, V, vec);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

}  // namespace golinear::kernels::cuda
