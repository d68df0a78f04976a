// The causal depthwise short convolution of width 4, its backward, and the hybrid's fused
// conv → RoPE / unit-norm input stage (short_conv.h).
#include "kernels/cuda/short_conv.h"

#include <algorithm>

#include "kernels/cuda/device_utils.cuh"

namespace golinear::kernels::cuda {

namespace {

using device::grid_for;

constexpr float kUnitNormEps = 1e-6f;
constexpr int kConvWidth = 4;

__global__ void short_conv_forward_kernel(bf16* y, const bf16* x, const float* w, int T, int N) {
  const long total = (long)T * N;
  for (long idx = blockIdx.x * (long)blockDim.x + threadIdx.x; idx < total;
       idx += (long)gridDim.x * blockDim.x) {
    const int t = (int)(idx / N), c = (int)(idx % N);
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < kConvWidth; ++i) {
      const int src = t - (kConvWidth - 1) + i;
      if (src >= 0) acc += w[(long)c * kConvWidth + i] * __bfloat162float(x[(long)src * N + c]);
    }
    y[idx] = __float2bfloat16(acc);
  }
}

// Time-parallel: one thread per channel and run of kConvBwdRun tokens, the four dy values it
// needs sliding along in registers. dx rows are written directly (null: skipped); the tap
// gradients of each run go to partial[run][c][i] and a second kernel sums the runs in order
// (deterministic, no atomics).
constexpr int kConvBwdRun = 64;
template <bool kWriteDx>
__global__ void __launch_bounds__(256) short_conv_backward_runs_kernel(
    float* __restrict__ dx, float* __restrict__ partial, const float* __restrict__ dy,
    const bf16* __restrict__ x, const float* __restrict__ w, int T, int N) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int run = blockIdx.y;
  if (c >= N) return;
  const float4 wc = *reinterpret_cast<const float4*>(w + (long)c * kConvWidth);
  const int s_begin = run * kConvBwdRun, s_end = min(T, s_begin + kConvBwdRun);
  // d[j] = dy[s + j] (0 beyond T); x_s feeds y_{s + 3 − i} through tap i.
  float d0 = dy[(long)s_begin * N + c];
  float d1 = s_begin + 1 < T ? dy[(long)(s_begin + 1) * N + c] : 0.0f;
  float d2 = s_begin + 2 < T ? dy[(long)(s_begin + 2) * N + c] : 0.0f;
  float dw0 = 0.0f, dw1 = 0.0f, dw2 = 0.0f, dw3 = 0.0f;
#pragma unroll 8
  for (int s = s_begin; s < s_end; ++s) {
    const float d3 = s + 3 < T ? dy[(long)(s + 3) * N + c] : 0.0f;
    const float xs = __bfloat162float(x[(long)s * N + c]);
    // the order of the unfused reference: taps i = 0 .. 3 ↔ t = s + 3 .. s
    if constexpr (kWriteDx) {
      float acc = 0.0f;
      acc += wc.x * d3;
      acc += wc.y * d2;
      acc += wc.z * d1;
      acc += wc.w * d0;
      dx[(long)s * N + c] = acc;
    }
    dw0 += d3 * xs;
    dw1 += d2 * xs;
    dw2 += d1 * xs;
    dw3 += d0 * xs;
    d0 = d1, d1 = d2, d2 = d3;
  }
  *reinterpret_cast<float4*>(partial + ((long)run * N + c) * kConvWidth) = make_float4(dw0, dw1, dw2, dw3);
}

// dw (N, 4) += Σ_run partial[run] in run order.
__global__ void short_conv_dw_reduce_kernel(float* __restrict__ dw, const float* __restrict__ partial,
                                            int runs, int N) {
  const long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  const long n = (long)N * kConvWidth;
  if (i >= n) return;
  float acc = 0.0f;
  for (int r = 0; r < runs; ++r) acc += partial[(long)r * n + i];
  dw[i] += acc;
}

// The hybrid's input stage in one pass: causal conv of width 4 (rounded to bf16, as stored by
// the unfused stages), then any of: the conv output, its RoPE at position t (table cs), its
// unit-norm row. Same arithmetic as short_conv_forward → rope_apply / unit_rows_forward.
// One warp per (head, run of kConvRun tokens): the taps stay in registers and the last three
// inputs slide along in registers, so every input row is read once. Lane l owns the PP = D/64
// consecutive elements l·PP .. of each half (bf16 pairs, float4 taps).
constexpr int kConvRun = 16;
template <int D>
__global__ void __launch_bounds__(256) conv_rope_unit_kernel(
    bf16* __restrict__ conv_out, bf16* __restrict__ rope_out, bf16* __restrict__ unit_out,
    const bf16* __restrict__ x, const float* __restrict__ w, const float2* __restrict__ cs, int T,
    int heads) {
  constexpr int half = D / 2, PP = half / 32;
  static_assert(PP == 1 || PP == 2, "D must be 64 or 128");
  const int lane = threadIdx.x % 32;
  const long stride = (long)heads * D;
  const long runs = (long)(T + kConvRun - 1) / kConvRun * heads;
  auto load = [&](int t, long ch, float (&out)[PP]) {
    if constexpr (PP == 2) {
      const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(x + (long)t * stride + ch));
      out[0] = f.x, out[1] = f.y;
    } else {
      out[0] = __bfloat162float(x[(long)t * stride + ch]);
    }
  };
  for (long run = (blockIdx.x * (long)blockDim.x + threadIdx.x) / 32; run < runs;
       run += (long)gridDim.x * blockDim.x / 32) {
    const int hd = (int)(run % heads), t_begin = (int)(run / heads) * kConvRun;
    const int t_end = min(T, t_begin + kConvRun);
    float4 wv[2][PP];
    float hist[2][3][PP];  // inputs at t − 3, t − 2, t − 1
#pragma unroll
    for (int side = 0; side < 2; ++side) {
      const long ch = (long)hd * D + side * half + lane * PP;
#pragma unroll
      for (int pp = 0; pp < PP; ++pp) wv[side][pp] = *reinterpret_cast<const float4*>(w + (ch + pp) * kConvWidth);
#pragma unroll
      for (int i = 0; i < 3; ++i) {
        const int src = t_begin - 3 + i;
        if (src >= 0) load(src, ch, hist[side][i]);
        else
#pragma unroll
          for (int pp = 0; pp < PP; ++pp) hist[side][i][pp] = 0.0f;
      }
    }
#pragma unroll 2
    for (int t = t_begin; t < t_end; ++t) {
      const long row = (long)t * heads + hd;
      float c[2][PP];  // c[0][p]: element i = lane·PP + p; c[1][p]: i + half
#pragma unroll
      for (int side = 0; side < 2; ++side) {
        float now[PP];
        load(t, (long)hd * D + side * half + lane * PP, now);
#pragma unroll
        for (int pp = 0; pp < PP; ++pp) {
          const float4 wc = wv[side][pp];
          float acc = 0.0f;  // taps in order i = 0 .. 3, as the unfused kernel
          acc += wc.x * hist[side][0][pp];
          acc += wc.y * hist[side][1][pp];
          acc += wc.z * hist[side][2][pp];
          acc += wc.w * now[pp];
          c[side][pp] = __bfloat162float(__float2bfloat16(acc));
          hist[side][0][pp] = hist[side][1][pp];
          hist[side][1][pp] = hist[side][2][pp];
          hist[side][2][pp] = now[pp];
        }
      }
      float ss = 0.0f;
#pragma unroll
      for (int pp = 0; pp < PP; ++pp) ss += c[0][pp] * c[0][pp] + c[1][pp] * c[1][pp];
      const float inv = rsqrtf(device::warp_sum(ss) + kUnitNormEps);
      float ou[2][PP], orr[2][PP];
#pragma unroll
      for (int pp = 0; pp < PP; ++pp) {
        const float a = c[0][pp], b = c[1][pp];
        ou[0][pp] = a * inv, ou[1][pp] = b * inv;
        if (rope_out) {
          const float2 e = cs[(long)t * half + lane * PP + pp];
          orr[0][pp] = a * e.x - b * e.y;
          orr[1][pp] = b * e.x + a * e.y;
        }
      }
      auto store = [&](bf16* out, const float (&vals)[2][PP]) {
#pragma unroll
        for (int side = 0; side < 2; ++side) {
          bf16* dst = out + row * D + side * half + lane * PP;
          if constexpr (PP == 2)
            *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(vals[side][0], vals[side][1]);
          else
            dst[0] = __float2bfloat16(vals[side][0]);
        }
      };
      if (conv_out) store(conv_out, c);
      if (unit_out) store(unit_out, ou);
      if (rope_out) store(rope_out, orr);
    }
  }
}

}  // namespace

Status short_conv_forward(bf16* y, const bf16* x, const float* w, int T, int N, cudaStream_t stream) {
  short_conv_forward_kernel<<<grid_for((long)T * N, 256), 256, 0, stream>>>(y, x, w, T, N);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

size_t short_conv_backward_workspace_bytes(int T, int N) {
  const long runs = std::max(1, (T + kConvBwdRun - 1) / kConvBwdRun);
  return (size_t)runs * N * kConvWidth * sizeof(float);
}

Status short_conv_backward(float* dx, float* dw, const float* dy, const bf16* x, const float* w,
                           int T, int N, void* workspace, size_t workspace_bytes,
                           cudaStream_t stream) {
  if (T < 1 || N < 1) return ok_status();
  if (workspace_bytes < short_conv_backward_workspace_bytes(T, N))
    return make_error("short_conv_backward: workspace too small");
  const int runs = (T + kConvBwdRun - 1) / kConvBwdRun;
  float* partial = static_cast<float*>(workspace);
  const dim3 grid((N + 255) / 256, runs);
  if (dx)
    short_conv_backward_runs_kernel<true><<<grid, 256, 0, stream>>>(dx, partial, dy, x, w, T, N);
  else
    short_conv_backward_runs_kernel<false><<<grid, 256, 0, stream>>>(dx, partial, dy, x, w, T, N);
  GL_CUDA_CHECK_LAUNCH();
  const long n = (long)N * kConvWidth;
  short_conv_dw_reduce_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(dw, partial, runs, N);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status conv_rope_unit_forward(bf16* conv_out, bf16* rope_out, bf16* unit_out, const bf16* x,
                              const float* w, const float2* cs, int T, int heads, int D,
                              cudaStream_t stream) {
  if (rope_out && !cs) return make_error("conv_rope_unit_forward: RoPE needs the table");
  const long runs = (T + kConvRun - 1) / kConvRun;
  return dispatch_head_dim(D, [&](auto d) -> Status {
    constexpr int Dc = decltype(d)::value;
    conv_rope_unit_kernel<Dc><<<grid_for(runs * heads * 32, 256), 256, 0, stream>>>(
        conv_out, rope_out, unit_out, x, w, cs, T, heads);
    GL_CUDA_CHECK_LAUNCH();
    return ok_status();
  });
}

}  // namespace golinear::kernels::cuda
