// The hybrid mixer's stages, its whole-sequence forward and its fused decode step (hybrid.h).
#include "kernels/cuda/hybrid.h"

#include <algorithm>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gated_delta.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/short_conv.h"

namespace golinear::kernels::cuda {

namespace {

constexpr float kUnitNormEps = 1e-6f;
constexpr int kConvWidth = 4;

size_t align_up(size_t x) { return (x + 255) / 256 * 256; }

unsigned blocks_for(long n, int threads) { return (unsigned)std::min<long>((n + threads - 1) / threads, 1L << 20); }

// logits (T, 3H) = x [w_a; w_b; w_λ]ᵀ → g, β, λ (T, H).
__global__ void gates_kernel(float* g, float* beta, float* lambda, const float* logits,
                             const float* A_log, const float* dt_bias, const float* b_beta,
                             const float* b_lambda, int T, int H) {
  const long total = (long)T * H;
  for (long idx = blockIdx.x * (long)blockDim.x + threadIdx.x; idx < total;
       idx += (long)gridDim.x * blockDim.x) {
    const long t = idx / H;
    const int h = (int)(idx % H);
    const float* row = logits + t * 3 * H;
    g[idx] = -expf(A_log[h]) * device::softplusf_(row[h] + dt_bias[h]);
    beta[idx] = device::sigmoidf_(row[H + h] + b_beta[h]);
    lambda[idx] = device::sigmoidf_(row[2 * H + h] + b_lambda[h]);
  }
}

// ---- fused decode step ---------------------------------------------------------------------

// grid (H, D / 32), 256 threads: block (h, cb) owns query head h (kv head h / (H / G)) and value
// columns [32cb, 32cb + 32) of its state and output; the per-head front end (conv, gates, norms,
// RoPE, scores) is recomputed by the D/32 blocks of a head. The block that finishes last
// advances cache.position (one launch per token).
template <int D>
__global__ void __launch_bounds__(256) hybrid_decode_kernel(
    bf16* __restrict__ y, HybridParams p, HybridCacheView cache, const bf16* __restrict__ x,
    const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v, int C,
    int H, int G, int sinks, int window) {
  constexpr int R = D / 8;  // state rows per warp
  __shared__ float qc[D], kc[D], vc[D], qn[D], kn[D], qr[D], kr[D];
  __shared__ float scores[320];
  __shared__ float red[8][5], stat[2];
  __shared__ float part_r[8][32], part_o[8][32], part_y[8][32];
  const int h = blockIdx.x, cb = blockIdx.y, group = H / G, hk = h / group;
  const bool writer = cb == 0, leader = writer && h % group == 0;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const long pos = *cache.position;
  const int ring = window + 1;

  // 1 short conv over the raw rows of the last 3 tokens and this one.
  for (int idx = tid; idx < 3 * D; idx += 256) {
    const int which = idx / D, d = idx % D;
    const float* hist = which == 0 ? cache.conv_q : which == 1 ? cache.conv_k : cache.conv_v;
    const float* w = which == 0 ? p.conv_q : which == 1 ? p.conv_k : p.conv_v;
    const int heads = which == 0 ? H : G, head = which == 0 ? h : hk;
    const bf16* now = which == 0 ? q : which == 1 ? k : v;
    const long ch = (long)head * D + d;
    float acc = w[ch * kConvWidth + 3] * __bfloat162float(now[ch]);
#pragma unroll
    for (int i = 0; i < 3; ++i) {
      const long j = pos - 3 + i;
      if (j >= 0) acc += w[ch * kConvWidth + i] * hist[((j % 4) * heads + head) * (long)D + d];
    }
    (which == 0 ? qc : which == 1 ? kc : vc)[d] = acc;
  }
  // 2 gate logits (three dot products of length C, 16-byte loads) and the two squared norms.
  float part[5] = {0, 0, 0, 0, 0};
  const int C8 = C / 8;
  const bf16* w0 = p.w_gates + (long)h * C;
  const bf16* w1 = p.w_gates + ((long)H + h) * C;
  const bf16* w2 = p.w_gates + (2L * H + h) * C;
  const bool aligned = ((reinterpret_cast<size_t>(x) | reinterpret_cast<size_t>(w0) |
                         reinterpret_cast<size_t>(w1) | reinterpret_cast<size_t>(w2)) & 15) == 0;
  if (aligned) {
    for (int c8 = tid; c8 < C8; c8 += 256) {
      const uint4 xv = reinterpret_cast<const uint4*>(x)[c8];
      const uint4 a0 = reinterpret_cast<const uint4*>(w0)[c8];
      const uint4 a1 = reinterpret_cast<const uint4*>(w1)[c8];
      const uint4 a2 = reinterpret_cast<const uint4*>(w2)[c8];
      const __nv_bfloat162* px = reinterpret_cast<const __nv_bfloat162*>(&xv);
      const __nv_bfloat162* p0 = reinterpret_cast<const __nv_bfloat162*>(&a0);
      const __nv_bfloat162* p1 = reinterpret_cast<const __nv_bfloat162*>(&a1);
      const __nv_bfloat162* p2 = reinterpret_cast<const __nv_bfloat162*>(&a2);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 fx = __bfloat1622float2(px[e]), f0 = __bfloat1622float2(p0[e]),
                     f1 = __bfloat1622float2(p1[e]), f2 = __bfloat1622float2(p2[e]);
        part[0] += fx.x * f0.x + fx.y * f0.y;
        part[1] += fx.x * f1.x + fx.y * f1.y;
        part[2] += fx.x * f2.x + fx.y * f2.y;
      }
    }
  }
  for (int c = aligned ? C8 * 8 + tid : tid; c < C; c += 256) {
    const float xc = __bfloat162float(x[c]);
    part[0] += xc * __bfloat162float(w0[c]);
    part[1] += xc * __bfloat162float(w1[c]);
    part[2] += xc * __bfloat162float(w2[c]);
  }
  __syncthreads();  // conv rows visible
  if (tid < D) part[3] = qc[tid] * qc[tid], part[4] = kc[tid] * kc[tid];
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
  const float g_now = -expf(p.A_log[h]) * device::softplusf_(tot[0] + p.dt_bias[h]);
  const float beta_now = device::sigmoidf_(tot[1] + p.b_beta[h]);
  const float lambda = device::sigmoidf_(tot[2] + p.b_lambda[h]);
  const float inv_q = rsqrtf(tot[3] + kUnitNormEps), inv_k = rsqrtf(tot[4] + kUnitNormEps);
  // 3 unit norms (linear branch) and RoPE (exact branch).
  for (int d = tid; d < D; d += 256) {
    qn[d] = qc[d] * inv_q;
    kn[d] = kc[d] * inv_k;
    const int i = d % (D / 2);
    float s, c;
    sincosf((float)pos * p.inv_freq[i], &s, &c);
    const int other = d < D / 2 ? d + D / 2 : d - D / 2;
    const float sgn = d < D / 2 ? -1.0f : 1.0f;
    qr[d] = qc[d] * c + sgn * qc[other] * s;
    kr[d] = kc[d] * c + sgn * kc[other] * s;
  }
  __syncthreads();
  // 4 exact branch scores: keys j < sinks, then t − window < j ≤ t (the current one from smem).
  const long n_sink = min((long)sinks, pos + 1);
  const long w_begin = max((long)sinks, pos - window + 1);
  const int n_keys = (int)(n_sink + max(0L, pos - w_begin + 1));
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
  // the window enters the state, then q̂ reads it. Warp w holds rows [wR, wR + R), lane column e.
  const long leaving = pos - window;
  const bool enters = leaving >= sinks && leaving >= 0;
  const int e = lane, col = cb * 32 + e;
  float* S = cache.state + (long)h * D * D;
  float sreg[R];
#pragma unroll
  for (int i = 0; i < R; ++i) sreg[i] = S[(long)(warp * R + i) * D + col];
  float alpha = 1.0f, b = 0.0f;
  const bf16* k_leave = nullptr;
  float v_leave = 0.0f;
  if (enters) {
    const long slot = leaving % ring;
    alpha = expf(cache.ring_g[slot * H + h]);
    b = cache.ring_beta[slot * H + h];
    k_leave = cache.ring_key + (slot * G + hk) * (long)D;
    v_leave = __bfloat162float(cache.ring_v[(slot * G + hk) * (long)D + col]);
    float r = 0.0f;
#pragma unroll
    for (int i = 0; i < R; ++i) r += __bfloat162float(k_leave[warp * R + i]) * sreg[i];
    part_r[warp][e] = r;
  }
  __syncthreads();  // scores and part_r
  if (warp == 0) {  // softmax statistics
    float m = -INFINITY;
    for (int idx = lane; idx < n_keys; idx += 32) m = fmaxf(m, scores[idx]);
    m = device::warp_max(m);
    float se = 0.0f;
    for (int idx = lane; idx < n_keys; idx += 32) se += expf(scores[idx] - m);
    se = device::warp_sum(se);
    if (lane == 0) stat[0] = m, stat[1] = 1.0f / se;
  }
  float o = 0.0f;
  if (enters) {
    float r = 0.0f;
#pragma unroll
    for (int w = 0; w < 8; ++w) r += part_r[w][e];
    const float u = b * (v_leave - alpha * r);
#pragma unroll
    for (int i = 0; i < R; ++i) {
      sreg[i] = alpha * sreg[i] + __bfloat162float(k_leave[warp * R + i]) * u;
      S[(long)(warp * R + i) * D + col] = sreg[i];
    }
  }
#pragma unroll
  for (int i = 0; i < R; ++i) o += qn[warp * R + i] * sreg[i];
  part_o[warp][e] = o;
  __syncthreads();  // stat
  // 6 exact output on the 32 columns: warp w sums keys w, w + 8, …
  {
    const float m = stat[0];
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
    ye *= stat[1];
    y[(long)h * D + col] = __float2bfloat16((1.0f - lambda) * ye + lambda * yl);
  }
  // 7 this token into the cache (slots no block reads in this step).
  if (writer) {
    const long slot = pos % ring;
    for (int d = tid; d < D; d += 256) {
      cache.conv_q[((pos % 4) * H + h) * (long)D + d] = __bfloat162float(q[(long)h * D + d]);
      if (leader) {
        cache.conv_k[((pos % 4) * G + hk) * (long)D + d] = __bfloat162float(k[(long)hk * D + d]);
        cache.conv_v[((pos % 4) * G + hk) * (long)D + d] = __bfloat162float(v[(long)hk * D + d]);
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
  // 8 the last block to finish advances the position (every block has read it by now).
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


}  // namespace

Status hybrid_gates_forward(float* g, float* beta, float* lambda, const float* logits,
                            const float* A_log, const float* dt_bias, const float* b_beta,
                            const float* b_lambda, int T, int H, cudaStream_t stream) {
  gates_kernel<<<blocks_for((long)T * H, 256), 256, 0, stream>>>(g, beta, lambda, logits, A_log,
                                                                 dt_bias, b_beta, b_lambda, T, H);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

namespace {

// hybrid_forward's workspace, carved in order from `base`; with a null base only its size (one
// layout for hybrid_forward_workspace_bytes and the forward).
struct ForwardScratch {
  bf16 *qr, *qn, *kr, *kn, *vc;
  float *logits, *g, *beta, *lambda;
  float2* cs;  // the RoPE table (T, D/2)
  void* gdn;
  size_t gdn_bytes, bytes;
};
ForwardScratch forward_scratch(char* base, const HybridShape& s, int T) {
  const size_t tq = (size_t)T * s.H * s.D, tk = (size_t)T * s.G * s.D, th = (size_t)T * s.H;
  size_t used = 0;
  auto take = [&](size_t bytes) {
    char* r = base ? base + used : nullptr;
    used += align_up(bytes);
    return r;
  };
  ForwardScratch f;
  // The RoPE table in a q-sized room when it fits (T·D·4 ≤ T·H·D·2 for H ≥ 2).
  f.cs = reinterpret_cast<float2*>(take(s.H >= 2 ? tq * 2 : (size_t)T * s.D * 4));
  f.qr = (bf16*)take(tq * 2), f.qn = (bf16*)take(tq * 2);
  f.kr = (bf16*)take(tk * 2), f.kn = (bf16*)take(tk * 2), f.vc = (bf16*)take(tk * 2);
  f.logits = (float*)take(th * 3 * 4);
  f.g = (float*)take(th * 4), f.beta = (float*)take(th * 4), f.lambda = (float*)take(th * 4);
  f.gdn_bytes = gated_delta_forward_workspace_bytes(std::max(1, T - s.sinks - s.window), s.H, s.D,
                                                    false);
  f.gdn = take(f.gdn_bytes);
  f.bytes = used;
  return f;
}

}  // namespace

size_t hybrid_forward_workspace_bytes(const HybridShape& s, int T) {
  return forward_scratch(nullptr, s, T).bytes;
}

// Stages: RoPE table → conv + RoPE + unit norm (q, k, v) → gate GEMM + gates → linear branch
// written straight into y (rows ≥ s + w) → exact branch with the mix gate in its epilogue, reading
// y_lin from y and writing y in place (no y_exact / y_lin buffers, no memset, no mix pass).
namespace {
// hybrid_forward with an optional event recorded after each stage (events[0] before the first).
Status hybrid_forward_impl(bf16* y, float* state_final, const HybridShape& s,
                           const HybridParams& p, const bf16* x, const bf16* q, const bf16* k,
                           const bf16* v, int T, void* workspace, size_t workspace_bytes,
                           cublasHandle_t cublas, cudaStream_t stream, cudaEvent_t* events) {
  auto mark = [&](int i) -> Status {
    if (events) GL_CUDA_CHECK(cudaEventRecord(events[i], stream));
    return ok_status();
  };
  GL_TRY(mark(0));
  const ForwardScratch f = forward_scratch(static_cast<char*>(workspace), s, T);
  if (workspace_bytes < f.bytes) return make_error("hybrid_forward: workspace too small");
  bf16 *qr = f.qr, *qn = f.qn, *kr = f.kr, *kn = f.kn, *vc = f.vc;
  float *logits = f.logits, *g = f.g, *beta = f.beta, *lambda = f.lambda;
  float2* cs = f.cs;
  GL_TRY(rope_table(cs, p.inv_freq, T, s.D, 0, stream));
  GL_TRY(conv_rope_unit_forward(nullptr, qr, qn, q, p.conv_q, cs, T, s.H, s.D, stream));
  GL_TRY(conv_rope_unit_forward(nullptr, kr, kn, k, p.conv_k, cs, T, s.G, s.D, stream));
  GL_TRY(conv_rope_unit_forward(vc, nullptr, nullptr, v, p.conv_v, cs, T, s.G, s.D, stream));
  GL_TRY(mark(1));
  GL_TRY(gemm_bf16_nt(cublas, logits, false, x, p.w_gates, T, 3 * s.H, s.C, stream));
  GL_TRY(hybrid_gates_forward(g, beta, lambda, logits, p.A_log, p.dt_bias, p.b_beta, p.b_lambda, T, s.H,
                              stream));
  GL_TRY(mark(2));
  // Linear branch with the delayed read (keys from row s, queries from row s + w), into y.
  const int shift = s.sinks + s.window;
  if (T > shift) {
    const int N = T - shift;
    GL_TRY(gated_delta_chunked_forward(
        y + (size_t)shift * s.H * s.D, state_final, nullptr, qn + (size_t)shift * s.H * s.D,
        kn + (size_t)s.sinks * s.G * s.D, vc + (size_t)s.sinks * s.G * s.D,
        g + (size_t)s.sinks * s.H, beta + (size_t)s.sinks * s.H, N, s.H, s.G, s.D, f.gdn,
        f.gdn_bytes, stream));
  }
  GL_TRY(mark(3));
  // Exact branch and mix gate: y = (1 − λ) y_exact + λ y_lin (y_lin = 0 before row s + w).
  GL_TRY(attention_forward_mixed(y, lambda, shift, qr, kr, vc, T, s.H, s.G, s.D,
                                 AttentionMaskSpec{s.sinks, s.window}, stream));
  return mark(4);
}
}  // namespace

Status hybrid_forward(bf16* y, float* state_final, const HybridShape& s, const HybridParams& p,
                      const bf16* x, const bf16* q, const bf16* k, const bf16* v, int T,
                      void* workspace, size_t workspace_bytes, cublasHandle_t cublas,
                      cudaStream_t stream) {
  return hybrid_forward_impl(y, state_final, s, p, x, q, k, v, T, workspace, workspace_bytes,
                             cublas, stream, nullptr);
}

Status hybrid_forward_stage_ms(float stage_ms[4], bf16* y, const HybridShape& s,
                               const HybridParams& p, const bf16* x, const bf16* q,
                               const bf16* k, const bf16* v, int T, void* workspace,
                               size_t workspace_bytes, cublasHandle_t cublas,
                               cudaStream_t stream) {
  cudaEvent_t ev[5] = {};
  auto timed = [&]() -> Status {
    for (auto& e : ev) GL_CUDA_CHECK(cudaEventCreate(&e));
    GL_TRY(hybrid_forward_impl(y, nullptr, s, p, x, q, k, v, T, workspace, workspace_bytes,
                               cublas, stream, ev));
    GL_CUDA_CHECK(cudaEventSynchronize(ev[4]));
    for (int i = 0; i < 4; ++i) GL_CUDA_CHECK(cudaEventElapsedTime(&stage_ms[i], ev[i], ev[i + 1]));
    return ok_status();
  };
  Status st = timed();
  for (auto& e : ev)
    if (e) cudaEventDestroy(e);
  return st;
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

Status hybrid_decode_step(bf16* y, const HybridShape& s, const HybridParams& p,
                          const HybridCacheView& cache, const bf16* x, const bf16* q,
                          const bf16* k, const bf16* v, cudaStream_t stream) {
  if (s.sinks + s.window > 256) return make_error("hybrid_decode_step: sinks + window > 256");
  if (s.window < 1 || s.sinks < 0) return make_error("hybrid_decode_step: need window ≥ 1, sinks ≥ 0");
  if (s.H % s.G != 0) return make_error("hybrid_decode_step: G must divide H");
  GL_TRY(dispatch_head_dim(s.D, [&](auto d) -> Status {
    constexpr int Dc = decltype(d)::value;
    hybrid_decode_kernel<Dc><<<dim3(s.H, Dc / 32), 256, 0, stream>>>(
        y, p, cache, x, q, k, v, s.C, s.H, s.G, s.sinks, s.window);
    GL_CUDA_CHECK_LAUNCH();
    return ok_status();
  }));
  return ok_status();
}

}  // namespace golinear::kernels::cuda
