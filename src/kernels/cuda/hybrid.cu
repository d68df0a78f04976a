// The hybrid mixer's stages, its whole-sequence forward and its fused decode step (hybrid.h).
#include "kernels/cuda/hybrid.h"

#include <algorithm>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gated_delta.h"
#include "kernels/cuda/gemm.h"

namespace golinear::kernels::cuda {

namespace {

constexpr float kUnitNormEps = 1e-6f;
constexpr int kConvWidth = 4;

size_t align_up(size_t x) { return (x + 255) / 256 * 256; }

unsigned blocks_for(long n, int threads) { return (unsigned)std::min<long>((n + threads - 1) / threads, 1L << 20); }

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

// One thread per (token, frequency): the angle's sincos once, applied to every head.
__global__ void rope_kernel(bf16* x, const float* inv_freq, int T, int N, int D, long pos0,
                            float sign) {
  const int half = D / 2;
  const long total = (long)T * half;
  for (long idx = blockIdx.x * (long)blockDim.x + threadIdx.x; idx < total;
       idx += (long)gridDim.x * blockDim.x) {
    const int i = (int)(idx % half);
    const int t = (int)(idx / half);
    const float angle = (float)(pos0 + t) * inv_freq[i];  // fp32 angle, as the CPU reference
    float s, c;
    sincosf(angle, &s, &c);
    s *= sign;
    for (int n = 0; n < N; ++n) {
      bf16* row = x + ((long)t * N + n) * D;
      const float a = __bfloat162float(row[i]), b = __bfloat162float(row[i + half]);
      row[i] = __float2bfloat16(a * c - b * s);
      row[i + half] = __float2bfloat16(b * c + a * s);
    }
  }
}

// cs (T, D/2) = (cos, sin) of (pos0 + t) · inv_freq[i], fp32 angle as the CPU reference.
__global__ void rope_table_kernel(float2* cs, const float* inv_freq, int T, int half, long pos0) {
  const long total = (long)T * half;
  for (long idx = blockIdx.x * (long)blockDim.x + threadIdx.x; idx < total;
       idx += (long)gridDim.x * blockDim.x) {
    const int i = (int)(idx % half);
    const int t = (int)(idx / half);
    float s, c;
    sincosf((float)(pos0 + t) * inv_freq[i], &s, &c);
    cs[idx] = make_float2(c, s);
  }
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

__global__ void swiglu_kernel(bf16* out, const bf16* gate, const bf16* up, long N) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < N; i += (long)gridDim.x * blockDim.x) {
    const float z = __bfloat162float(gate[i]);
    out[i] = __float2bfloat16(z / (1.0f + expf(-z)) * __bfloat162float(up[i]));
  }
}

// logits (T, R) → g, β (columns 0, H) and λ (column lambda_row), any output null: skipped.
__global__ void gates_kernel(float* g, float* beta, float* lambda, const float* logits, int R,
                             int lambda_row, const float* A_log, const float* dt_bias,
                             const float* b_beta, const float* b_lambda, const float* c_lse,
                             const float* lse, int T, int H) {
  const long total = (long)T * H;
  for (long idx = blockIdx.x * (long)blockDim.x + threadIdx.x; idx < total;
       idx += (long)gridDim.x * blockDim.x) {
    const long t = idx / H;
    const int h = (int)(idx % H);
    const float* row = logits + t * R;
    if (g) g[idx] = -expf(A_log[h]) * device::softplusf_(row[h] + dt_bias[h]);
    if (beta) beta[idx] = device::sigmoidf_(row[H + h] + b_beta[h]);
    if (lambda) {
      float z = row[lambda_row + h] + b_lambda[h];
      if (c_lse) z -= c_lse[h] * lse[idx];
      lambda[idx] = device::sigmoidf_(z);
    }
  }
}

// ---- fused decode step ---------------------------------------------------------------------

// grid (H, D / 32, B), 256 threads: block (h, cb, b) owns query head h (kv head h / (H / G))
// and value columns [32cb, 32cb + 32) of sequence b's state and output; the per-head front end
// (conv, gates, norms, RoPE, scores) is recomputed by the D/32 blocks of a head. The block of a
// sequence that finishes last advances its cache.position (one launch per token). Dynamic shared
// memory: the exact branch's scores, sinks + window + 1 floats.
template <int D>
__global__ void __launch_bounds__(256) hybrid_decode_kernel(
    bf16* __restrict__ y, HybridParams p, const HybridCacheView* __restrict__ caches,
    const bf16* __restrict__ x, const bf16* __restrict__ q, const bf16* __restrict__ k,
    const bf16* __restrict__ v, int C, int H, int G, int sinks, int window, HybridMix mix,
    bool linear_rope) {
  constexpr int R = D / 8;  // state rows per warp
  extern __shared__ float scores[];
  __shared__ float qc[D], kc[D], vc[D], qn[D], kn[D], qr[D], kr[D];
  __shared__ float red[8][5], stat[2];
  __shared__ float part_r[8][32], part_o[8][32], part_y[8][32];
  const int h = blockIdx.x, cb = blockIdx.y, seq = blockIdx.z, group = H / G, hk = h / group;
  const HybridCacheView cache = caches[seq];
  x += (long)seq * C;
  q += (long)seq * H * D;
  k += (long)seq * G * D;
  v += (long)seq * G * D;
  y += (long)seq * H * D;
  const bool writer = cb == 0, leader = writer && h % group == 0;
  const bool has_exact = mix != HybridMix::linear, has_linear = mix != HybridMix::exact;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const long pos = *cache.position;
  const int ring = window + 1;

  // 1 short conv over the raw rows of the last 3 tokens and this one (conv off: the rows as they
  //   are).
  for (int idx = tid; idx < 3 * D; idx += 256) {
    const int which = idx / D, d = idx % D;
    const float* hist = which == 0 ? cache.conv_q : which == 1 ? cache.conv_k : cache.conv_v;
    const float* w = which == 0 ? p.conv_q : which == 1 ? p.conv_k : p.conv_v;
    const int heads = which == 0 ? H : G, head = which == 0 ? h : hk;
    const bf16* now = which == 0 ? q : which == 1 ? k : v;
    const long ch = (long)head * D + d;
    float acc = __bfloat162float(now[ch]);
    if (w) {
      acc *= w[ch * kConvWidth + 3];
#pragma unroll
      for (int i = 0; i < 3; ++i) {
        const long j = pos - 3 + i;
        if (j >= 0) acc += w[ch * kConvWidth + i] * hist[((j % 4) * heads + head) * (long)D + d];
      }
    }
    (which == 0 ? qc : which == 1 ? kc : vc)[d] = acc;
  }
  // 2 gate logits: dot products of length C with the rows present (16-byte loads).
  float part[5] = {0, 0, 0, 0, 0};
  const bf16* wrow[3] = {nullptr, nullptr, nullptr};
  if (has_linear) wrow[0] = p.w_gates + (long)h * C, wrow[1] = p.w_gates + ((long)H + h) * C;
  if (p.lambda_row >= 0) wrow[2] = p.w_gates + ((long)p.lambda_row + h) * C;
  const int C8 = C / 8;
  bool aligned = (reinterpret_cast<size_t>(x) & 15) == 0;
  for (int r = 0; r < 3; ++r)
    if (wrow[r]) aligned = aligned && (reinterpret_cast<size_t>(wrow[r]) & 15) == 0;
  if (aligned) {
    for (int c8 = tid; c8 < C8; c8 += 256) {
      const uint4 xv = reinterpret_cast<const uint4*>(x)[c8];
      const __nv_bfloat162* px = reinterpret_cast<const __nv_bfloat162*>(&xv);
#pragma unroll
      for (int r = 0; r < 3; ++r) {
        if (!wrow[r]) continue;
        const uint4 av = reinterpret_cast<const uint4*>(wrow[r])[c8];
        const __nv_bfloat162* pa = reinterpret_cast<const __nv_bfloat162*>(&av);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 fx = __bfloat1622float2(px[e]), fa = __bfloat1622float2(pa[e]);
          part[r] += fx.x * fa.x + fx.y * fa.y;
        }
      }
    }
  }
  for (int c = aligned ? C8 * 8 + tid : tid; c < C; c += 256) {
    const float xc = __bfloat162float(x[c]);
#pragma unroll
    for (int r = 0; r < 3; ++r)
      if (wrow[r]) part[r] += xc * __bfloat162float(wrow[r][c]);
  }
  __syncthreads();  // conv rows visible
  // 3 RoPE (the exact branch, and the linear branch with linear_rope), then the squared norms of
  //   what the linear branch reads.
  for (int d = tid; d < D; d += 256) {
    const int i = d % (D / 2);
    float s, c;
    sincosf((float)pos * p.inv_freq[i], &s, &c);
    const int other = d < D / 2 ? d + D / 2 : d - D / 2;
    const float sgn = d < D / 2 ? -1.0f : 1.0f;
    qr[d] = qc[d] * c + sgn * qc[other] * s;
    kr[d] = kc[d] * c + sgn * kc[other] * s;
  }
  __syncthreads();
  const float* lq = linear_rope ? qr : qc;
  const float* lk = linear_rope ? kr : kc;
  if (tid < D) part[3] = lq[tid] * lq[tid], part[4] = lk[tid] * lk[tid];
#pragma unroll
  for (int i = 0; i < 5; ++i) {
    const float t = device::warp_sum(part[i]);
    if (lane == 0) red[warp][i] = t;
  }
  __syncthreads();
  float tot[5];
#pragma unroll
  for (int i = 0; i < 5; ++i) {
    tot[i] = 0.0f;
#pragma unroll
    for (int w = 0; w < 8; ++w) tot[i] += red[w][i];
  }
  const float g_now = has_linear ? -expf(p.A_log[h]) * device::softplusf_(tot[0] + p.dt_bias[h]) : 0.0f;
  const float beta_now = has_linear ? device::sigmoidf_(tot[1] + p.b_beta[h]) : 0.0f;
  const float inv_q = rsqrtf(tot[3] + kUnitNormEps), inv_k = rsqrtf(tot[4] + kUnitNormEps);
  for (int d = tid; d < D; d += 256) qn[d] = lq[d] * inv_q, kn[d] = lk[d] * inv_k;
  __syncthreads();
  // 4 exact branch scores: keys j < sinks, then t − window < j ≤ t (the current one from smem).
  const long n_sink = min((long)sinks, pos + 1);
  const long w_begin = max((long)sinks, pos - window + 1);
  const int n_keys = has_exact ? (int)(n_sink + max(0L, pos - w_begin + 1)) : 0;
  auto key_pos = [&](int idx) -> long { return idx < n_sink ? (long)idx : w_begin + (idx - n_sink); };
  const float scale = rsqrtf((float)D);
  for (int idx = warp; idx < n_keys; idx += 8) {
    const long j = key_pos(idx);
    float s = 0.0f;
    if (j == pos) {
      for (int d = lane; d < D; d += 32) s += qr[d] * kr[d];
    } else {
      const bf16* kj = idx < n_sink ? cache.sink_k + ((long)idx * G + hk) * D
                                    : cache.ring_k + ((j % ring) * G + hk) * (long)D;
#pragma unroll
      for (int d = lane; d < D; d += 32) s += qr[d] * __bfloat162float(kj[d]);
    }
    s = device::warp_sum(s);
    if (lane == 0) scores[idx] = s * scale;
  }
  // 5 linear branch on this block's 32 columns (independent of the scores): the token leaving
  //   the window enters the state (with window 0, this token itself), then q̂ reads it. Warp w
  //   holds rows [wR, wR + R), lane column e.
  const long leaving = pos - window;
  const bool enters = has_linear && leaving >= sinks && leaving >= 0;
  const int e = lane, col = cb * 32 + e;
  float* S = cache.state + (long)h * D * D;
  float sreg[R];
  float alpha = 1.0f, b = 0.0f, v_leave = 0.0f;
  if (has_linear) {
#pragma unroll
    for (int i = 0; i < R; ++i) sreg[i] = S[(long)(warp * R + i) * D + col];
  }
  float k_leave[R];
  if (enters) {
    if (window == 0) {
      alpha = expf(g_now), b = beta_now, v_leave = vc[col];
#pragma unroll
      for (int i = 0; i < R; ++i) k_leave[i] = kn[warp * R + i];
    } else {
      const long slot = leaving % ring;
      alpha = expf(cache.ring_g[slot * H + h]);
      b = cache.ring_beta[slot * H + h];
      const bf16* kl = cache.ring_key + (slot * G + hk) * (long)D;
      v_leave = __bfloat162float(cache.ring_v[(slot * G + hk) * (long)D + col]);
#pragma unroll
      for (int i = 0; i < R; ++i) k_leave[i] = __bfloat162float(kl[warp * R + i]);
    }
    float r = 0.0f;
#pragma unroll
    for (int i = 0; i < R; ++i) r += k_leave[i] * sreg[i];
    part_r[warp][e] = r;
  }
  __syncthreads();  // scores and part_r
  if (warp == 0 && n_keys > 0) {  // softmax statistics
    float m = -INFINITY;
    for (int idx = lane; idx < n_keys; idx += 32) m = fmaxf(m, scores[idx]);
    m = device::warp_max(m);
    float se = 0.0f;
    for (int idx = lane; idx < n_keys; idx += 32) se += expf(scores[idx] - m);
    se = device::warp_sum(se);
    if (lane == 0) stat[0] = m, stat[1] = se;
  }
  float o = 0.0f;
  if (enters) {
    float r = 0.0f;
#pragma unroll
    for (int w = 0; w < 8; ++w) r += part_r[w][e];
    const float u = b * (v_leave - alpha * r);
#pragma unroll
    for (int i = 0; i < R; ++i) {
      sreg[i] = alpha * sreg[i] + k_leave[i] * u;
      S[(long)(warp * R + i) * D + col] = sreg[i];
    }
  }
  if (has_linear) {
#pragma unroll
    for (int i = 0; i < R; ++i) o += qn[warp * R + i] * sreg[i];
  }
  part_o[warp][e] = o;
  __syncthreads();  // stat
  // 6 exact output on the 32 columns: warp w sums keys w, w + 8, …
  {
    const float m = n_keys > 0 ? stat[0] : 0.0f;
    float ye = 0.0f;
    for (int idx = warp; idx < n_keys; idx += 8) {
      const long j = key_pos(idx);
      const float vj = j == pos ? vc[col]
                       : idx < n_sink ? __bfloat162float(cache.sink_v[((long)j * G + hk) * D + col])
                                      : __bfloat162float(cache.ring_v[((j % ring) * G + hk) * (long)D + col]);
      ye += expf(scores[idx] - m) * vj;
    }
    part_y[warp][e] = ye;
  }
  __syncthreads();
  if (warp == 0) {
    float ye = 0.0f, yl = 0.0f;
#pragma unroll
    for (int w = 0; w < 8; ++w) ye += part_y[w][e], yl += part_o[w][e];
    float a = 1.0f, bl = 1.0f;  // y = a·y_exact + bl·y_lin
    if (n_keys > 0) ye /= stat[1];
    if (mix == HybridMix::gate) {
      float z = tot[2] + p.b_lambda[h];
      if (p.c_lse) z -= p.c_lse[h] * (stat[0] + logf(stat[1]));
      const float lambda = device::sigmoidf_(z);
      a = 1.0f - lambda, bl = lambda;
    } else if (mix == HybridMix::scale) {
      bl = p.gamma[h];
    } else if (mix == HybridMix::exact) {
      bl = 0.0f;
    } else if (mix == HybridMix::linear) {
      a = 0.0f;
    }
    y[(long)h * D + col] = __float2bfloat16(a * ye + bl * yl);
  }
  // 7 this token into the cache (slots no block reads in this step).
  if (writer) {
    const long slot = pos % ring;
    for (int d = tid; d < D; d += 256) {
      if (p.conv_q) cache.conv_q[((pos % 4) * H + h) * (long)D + d] = __bfloat162float(q[(long)h * D + d]);
      if (leader) {
        if (p.conv_k) {
          cache.conv_k[((pos % 4) * G + hk) * (long)D + d] = __bfloat162float(k[(long)hk * D + d]);
          cache.conv_v[((pos % 4) * G + hk) * (long)D + d] = __bfloat162float(v[(long)hk * D + d]);
        }
        cache.ring_k[(slot * G + hk) * (long)D + d] = __float2bfloat16(kr[d]);
        cache.ring_v[(slot * G + hk) * (long)D + d] = __float2bfloat16(vc[d]);
        cache.ring_key[(slot * G + hk) * (long)D + d] = __float2bfloat16(kn[d]);
        if (pos < sinks) {
          cache.sink_k[(pos * G + hk) * (long)D + d] = __float2bfloat16(kr[d]);
          cache.sink_v[(pos * G + hk) * (long)D + d] = __float2bfloat16(vc[d]);
        }
      }
    }
    if (tid == 0) {
      cache.ring_g[slot * H + h] = g_now;
      cache.ring_beta[slot * H + h] = beta_now;
    }
  }
  // 8 the last block of this sequence to finish advances its position (every block has read it).
  __syncthreads();
  if (tid == 0) {
    __threadfence();
    const unsigned ticket = atomicAdd(cache.step_done, 1u);
    if (ticket == gridDim.x * gridDim.y - 1) {
      *cache.position = pos + 1;
      *cache.step_done = 0;
      __threadfence();
    }
  }
}

// One thread per (token, channel) of the rows the cache keeps: the last window + 1 tokens
// (ring), the first sinks tokens, the last 3 raw rows (conv history). grid.y: 0 k-side (G·D
// channels), 1 q (H·D), 2 the gates (H).
__global__ void hybrid_cache_fill_kernel(HybridCacheView cache, const bf16* q, const bf16* k,
                                         const bf16* v, const bf16* kr, const bf16* vc,
                                         const bf16* kn, const float* g, const float* beta,
                                         int T, int H, int G, int D, int sinks, int window) {
  const int ring = window + 1;
  // The kept rows: the tail [tail0, T) (ring and conv history) and the sinks below it.
  const long first = max(0, T - ring), tail0 = max(0L, (long)T - max(ring, 3));
  const long head = min((long)sinks, tail0), rows = head + (T - tail0);
  const int part = blockIdx.y;
  const long width = part == 0 ? (long)G * D : part == 1 ? (long)H * D : H;
  for (long idx = blockIdx.x * (long)blockDim.x + threadIdx.x; idx < rows * width;
       idx += (long)gridDim.x * blockDim.x) {
    const long r = idx / width, c = idx % width;
    const long j = r < head ? r : tail0 + (r - head);
    const bool in_ring = j >= first, in_sinks = j < sinks, in_conv = j >= T - 3;
    const long slot = j % ring;
    if (part == 0) {
      const long src = j * width + c;
      if (in_ring && kr) {
        cache.ring_k[slot * width + c] = kr[src];
        cache.ring_v[slot * width + c] = vc[src];
        if (kn) cache.ring_key[slot * width + c] = kn[src];
      }
      if (in_sinks && kr) {
        cache.sink_k[j * width + c] = kr[src];
        cache.sink_v[j * width + c] = vc[src];
      }
      if (in_conv) {
        cache.conv_k[(j % 4) * width + c] = __bfloat162float(k[src]);
        cache.conv_v[(j % 4) * width + c] = __bfloat162float(v[src]);
      }
    } else if (part == 1) {
      if (in_conv) cache.conv_q[(j % 4) * width + c] = __bfloat162float(q[j * width + c]);
    } else if (in_ring && g) {
      cache.ring_g[slot * H + c] = g[j * H + c];
      cache.ring_beta[slot * H + c] = beta[j * H + c];
    }
  }
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
    *cache.position = T;
    *cache.step_done = 0;
  }
}

}  // namespace

Status short_conv_forward(bf16* y, const bf16* x, const float* w, int T, int N, cudaStream_t stream) {
  short_conv_forward_kernel<<<blocks_for((long)T * N, 256), 256, 0, stream>>>(y, x, w, T, N);
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

Status rope_table(float2* cs, const float* inv_freq, int T, int D, long pos0, cudaStream_t stream) {
  rope_table_kernel<<<blocks_for((long)T * D / 2, 256), 256, 0, stream>>>(cs, inv_freq, T, D / 2, pos0);
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
    conv_rope_unit_kernel<Dc><<<blocks_for(runs * heads * 32, 256), 256, 0, stream>>>(
        conv_out, rope_out, unit_out, x, w, cs, T, heads);
    GL_CUDA_CHECK_LAUNCH();
    return ok_status();
  });
}

Status unit_rows_forward(bf16* out, const bf16* in, long rows, int D, cudaStream_t stream) {
  unit_rows_forward_kernel<<<blocks_for(rows * 32, 256), 256, 0, stream>>>(out, in, rows, D);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status unit_rows_backward(float* din, const float* dout, const bf16* in, long rows, int D,
                          cudaStream_t stream) {
  unit_rows_backward_kernel<<<blocks_for(rows * 32, 256), 256, 0, stream>>>(din, dout, in, rows, D);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status rope_apply(bf16* x, const float* inv_freq, int T, int N, int D, long pos0, int sign,
                  cudaStream_t stream) {
  rope_kernel<<<blocks_for((long)T * D / 2, 256), 256, 0, stream>>>(x, inv_freq, T, N, D, pos0,
                                                                        (float)sign);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status rmsnorm_forward(bf16* out, const bf16* x, const float* w, int N, int C, float eps,
                       cudaStream_t stream) {
  rmsnorm_kernel<<<N, 256, 0, stream>>>(out, x, w, C, eps);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status swiglu_forward(bf16* out, const bf16* gate, const bf16* up, long N, cudaStream_t stream) {
  swiglu_kernel<<<blocks_for(N, 256), 256, 0, stream>>>(out, gate, up, N);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status hybrid_gates_forward(float* g, float* beta, float* lambda, const float* logits, int R,
                            int lambda_row, const float* A_log, const float* dt_bias,
                            const float* b_beta, const float* b_lambda, const float* c_lse,
                            const float* lse, int T, int H, cudaStream_t stream) {
  if (lambda && lambda_row < 0) return make_error("hybrid_gates_forward: λ without a λ row");
  if (T <= 0 || (!g && !beta && !lambda)) return ok_status();
  gates_kernel<<<blocks_for((long)T * H, 256), 256, 0, stream>>>(
      g, beta, lambda, logits, R, lambda_row, A_log, dt_bias, b_beta, b_lambda, c_lse, lse, T, H);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

size_t hybrid_cache_bytes(const HybridShape& s) {
  const size_t gd = (size_t)s.G * s.D, hd = (size_t)s.H * s.D, ring = s.window + 1;
  return align_up(sizeof(long) + sizeof(unsigned)) + align_up(4 * hd * 4) + 2 * align_up(4 * gd * 4) +
         2 * align_up(std::max(1, s.sinks) * gd * 2) + 3 * align_up(ring * gd * 2) +
         2 * align_up(ring * s.H * 4) + align_up((size_t)s.H * s.D * s.D * 4);
}

Result<HybridCacheView> hybrid_cache_create(const HybridShape& s, void* memory,
                                            cudaStream_t stream) {
  GL_CUDA_CHECK(cudaMemsetAsync(memory, 0, hybrid_cache_bytes(s), stream));
  const size_t gd = (size_t)s.G * s.D, hd = (size_t)s.H * s.D, ring = s.window + 1;
  char* w = static_cast<char*>(memory);
  auto take = [&](size_t bytes) { char* r = w; w += align_up(bytes); return r; };
  HybridCacheView c;
  c.position = (long*)take(sizeof(long) + sizeof(unsigned));
  c.step_done = reinterpret_cast<unsigned*>(c.position + 1);
  c.conv_q = (float*)take(4 * hd * 4);
  c.conv_k = (float*)take(4 * gd * 4);
  c.conv_v = (float*)take(4 * gd * 4);
  c.sink_k = (bf16*)take(std::max(1, s.sinks) * gd * 2);
  c.sink_v = (bf16*)take(std::max(1, s.sinks) * gd * 2);
  c.ring_k = (bf16*)take(ring * gd * 2);
  c.ring_v = (bf16*)take(ring * gd * 2);
  c.ring_key = (bf16*)take(ring * gd * 2);
  c.ring_g = (float*)take(ring * s.H * 4);
  c.ring_beta = (float*)take(ring * s.H * 4);
  c.state = (float*)take((size_t)s.H * s.D * s.D * 4);
  return c;
}

Status hybrid_cache_fill(const HybridCacheView& cache, const HybridShape& s, const bf16* q,
                         const bf16* k, const bf16* v, const bf16* kr, const bf16* vc,
                         const bf16* kn, const float* g, const float* beta, int T,
                         cudaStream_t stream) {
  if (T <= 0) return ok_status();
  const long widest = (long)(std::max(s.sinks, 0) + std::max(s.window + 1, 3)) * std::max(s.H, s.G) * s.D;
  hybrid_cache_fill_kernel<<<dim3(blocks_for(widest, 256), 3), 256, 0, stream>>>(
      cache, q, k, v, kr, vc, s.has_linear() ? kn : nullptr, s.has_linear() ? g : nullptr,
      beta, T, s.H, s.G, s.D, s.sinks, s.window);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status hybrid_decode_step(bf16* y, const HybridShape& s, const HybridParams& p,
                          const HybridCacheView* caches, int B, const bf16* x, const bf16* q,
                          const bf16* k, const bf16* v, cudaStream_t stream) {
  if (s.sinks < 0 || s.window < 0 || s.sinks + s.window + 1 > kHybridDecodeMaxKeys)
    return make_error("hybrid_decode_step: sinks ", s.sinks, " + window ", s.window,
                      " outside 0 ≤ sinks + window < ", kHybridDecodeMaxKeys);
  if (!s.has_exact() && s.sinks + s.window != 0)
    return make_error("hybrid_decode_step: no exact branch needs sinks = window = 0");
  if (s.G <= 0 || s.H % s.G != 0) return make_error("hybrid_decode_step: G must divide H");
  if (B <= 0) return ok_status();
  const size_t smem = (size_t)(s.sinks + s.window + 1) * sizeof(float);
  return dispatch_head_dim(s.D, [&](auto d) -> Status {
    constexpr int Dc = decltype(d)::value;
    auto kernel = hybrid_decode_kernel<Dc>;
    if (smem > 48 * 1024)
      GL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    kernel<<<dim3(s.H, Dc / 32, B), 256, smem, stream>>>(y, p, caches, x, q, k, v, s.C, s.H, s.G,
                                                         s.sinks, s.window, s.mix, s.linear_rope);
    GL_CUDA_CHECK_LAUNCH();
    return ok_status();
  });
}

}  // namespace golinear::kernels::cuda
