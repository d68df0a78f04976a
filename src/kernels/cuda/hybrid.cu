// The hybrid mixer's own kernels (hybrid.h): the gates and their backward, the mixing (forward,
// backward, fused with the NMSE loss), the decode cache and the fused decode step.
#include "kernels/cuda/hybrid.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/loss.h"

namespace golinear::kernels::cuda {

namespace {

using device::align_up;
using device::block_sum_double;
using device::grid_for;

// Partial sums of hybrid_mix_nmse_forward: the count loss.h's nmse_workspace_bytes holds.
constexpr int kReduceBlocks = 1024;
constexpr int kReduceThreads = 256;

// One block per head over every token (gates_backward_kernel, head_sum_kernel): 1,024 threads
// keep more of the strided loads in flight (256: 52 µs for T = 4096, H = 32 on the H200).
constexpr int kHeadSumThreads = 1024;

constexpr float kUnitNormEps = 1e-6f;
constexpr int kConvWidth = 4;


// logits (T, R) → g, β (columns 0, H) and λ (column lambda_row), any output null: skipped.
__global__ void gates_kernel(float* g, float* beta, float* lambda, const float* logits, int R,
                             int lambda_row, const float* A_log, const float* dt_bias,
                             const float* b_beta, const float* b_lambda, const float* c_lse,
                             const float* lse, const float* a_far, int far_start, int T, int H,
                             bool lambda_logit) {
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
      if (lambda_logit) {
        lambda[idx] = z;
        continue;
      }
      if (c_lse) z -= c_lse[h] * lse[idx];
      const long n_far = far_start >= 0 ? t - far_start + 1 : 1;
      if (far_start >= 0 && n_far > 0) z += a_far[h] * logf((float)n_far);
      lambda[idx] = n_far > 0 ? device::sigmoidf_(z) : 0.0f;
    }
  }
}

// ---- gates ---------------------------------------------------------------------------------

// One block per head h: loops over t in order, writes the a, b logit gradients (when dg is
// given) and sums the per-head parameter gradients.
__global__ void __launch_bounds__(kHeadSumThreads)
    gates_backward_kernel(float* dlogits, int R, int lambda_row, float* dA_log, float* ddt_bias,
                          float* db_beta, float* db_lambda, float* dc_lse, float* dlse,
                          float* da_far, const float* dg, const float* dbeta, const float* logits,
                          const float* g, const float* beta, const float* A_log,
                          const float* dt_bias, const float* c_lse, const float* lse,
                          int far_start, int T, int H) {
  __shared__ double scratch[32];
  const int h = blockIdx.x;
  const float decay = dg ? expf(A_log[h]) : 0.0f;
  double sum_a = 0, sum_u = 0, sum_z = 0, sum_l = 0, sum_c = 0, sum_f = 0;
  for (int t = threadIdx.x; t < T; t += blockDim.x) {
    const long row = (long)t * H + h;
    float* lrow = dlogits + (long)t * R;
    if (dg) {
      const float u = logits[(long)t * R + h] + dt_bias[h];
      // g = −exp(A_log)·softplus(u): ∂g/∂A_log = g, ∂g/∂u = −exp(A_log)·σ(u).
      const float du = dg[row] * -decay * device::sigmoidf_(u);
      const float b = beta[row];
      const float dz = dbeta[row] * b * (1.0f - b);
      lrow[h] = du;
      lrow[H + h] = dz;
      sum_a += (double)dg[row] * g[row];
      sum_u += du;
      sum_z += dz;
    }
    if (lambda_row >= 0) {
      const float dl = lrow[lambda_row + h];  // ∂/∂(λ-logit); λ-logit = … − c·lse
      sum_l += dl;
      if (c_lse) {
        sum_c -= (double)dl * lse[row];
        dlse[row] = -dl * c_lse[h];
      }
      if (far_start >= 0 && t - far_start + 1 > 0)  // λ-logit = … + a·log n_far(t)
        sum_f += (double)dl * logf((float)(t - far_start + 1));
    }
  }
  sum_a = block_sum_double(sum_a, scratch);
  sum_u = block_sum_double(sum_u, scratch);
  sum_z = block_sum_double(sum_z, scratch);
  sum_l = block_sum_double(sum_l, scratch);
  sum_c = block_sum_double(sum_c, scratch);
  sum_f = block_sum_double(sum_f, scratch);
  if (threadIdx.x == 0) {
    if (dg) {
      dA_log[h] += (float)sum_a;
      ddt_bias[h] += (float)sum_u;
      db_beta[h] += (float)sum_z;
    }
    if (lambda_row >= 0 && db_lambda) db_lambda[h] += (float)sum_l;
    if (c_lse && dc_lse) dc_lse[h] += (float)sum_c;
    if (far_start >= 0 && da_far) da_far[h] += (float)sum_f;
  }
}

// out (H) += Σ_t src[t·stride + h], one block per head, in order.
__global__ void __launch_bounds__(kHeadSumThreads)
    head_sum_kernel(float* out, const float* src, int stride, int T, int H) {
  __shared__ double scratch[32];
  const int h = blockIdx.x;
  double sum = 0;
  for (int t = threadIdx.x; t < T; t += blockDim.x) sum += src[(long)t * stride + h];
  sum = block_sum_double(sum, scratch);
  if (threadIdx.x == 0) out[h] += (float)sum;
}

// ---- mixing --------------------------------------------------------------------------------

// The coefficients of y = a·y_exact + b·y_lin for row (t, h) (HybridMix in hybrid.h).
struct MixCoef {
  float a, b;
};
__device__ __forceinline__ MixCoef mix_coef(HybridMix mix, const float* lambda,
                                            const float* gamma, long row, int h) {
  switch (mix) {
    case HybridMix::gate: { const float l = lambda[row]; return {1.0f - l, l}; }
    case HybridMix::add: return {1.0f, 1.0f};
    case HybridMix::scale: return {1.0f, gamma[h]};
    case HybridMix::exact: return {1.0f, 0.0f};
    default: return {0.0f, 1.0f};  // linear
  }
}
// a·ye + b·yl reading only the branches that exist.
__device__ __forceinline__ float mix_value(HybridMix mix, MixCoef c, const bf16* y_exact,
                                          const bf16* y_lin, long i, float* ye_out, float* yl_out) {
  const float ye = mix != HybridMix::linear ? __bfloat162float(y_exact[i]) : 0.0f;
  const float yl = mix != HybridMix::exact ? __bfloat162float(y_lin[i]) : 0.0f;
  *ye_out = ye, *yl_out = yl;
  return c.a * ye + c.b * yl;
}

__global__ void mix_forward_kernel(float* y32, bf16* y16, HybridMix mix, const bf16* y_exact,
                                   const bf16* y_lin, const float* lambda, const float* gamma,
                                   long rows, int H, int D) {
  const long total = rows * D;
  for (long idx = blockIdx.x * (long)blockDim.x + threadIdx.x; idx < total;
       idx += (long)gridDim.x * blockDim.x) {
    const long row = idx / D;
    const MixCoef c = mix_coef(mix, lambda, gamma, row, (int)(row % H));
    float ye, yl;
    const float y = mix_value(mix, c, y_exact, y_lin, idx, &ye, &yl);
    if (y32) y32[idx] = y;
    if (y16) y16[idx] = __float2bfloat16(y);
  }
}

// NC consecutive bf16 (NC·2 bytes, aligned) as floats / NC consecutive floats loaded and stored
// as one access (NC = 8: one 16-byte access of bf16, two of floats).
template <int NC>
__device__ __forceinline__ void load_row_part(const bf16* src, float* out) {
  if constexpr (NC == 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(src);
    const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __bfloat1622float2(p[e]);
      out[2 * e] = f.x, out[2 * e + 1] = f.y;
    }
  } else if constexpr (NC == 4) {
    const uint2 raw = *reinterpret_cast<const uint2*>(src);
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
    out[0] = a.x, out[1] = a.y, out[2] = b.x, out[3] = b.y;
  } else if constexpr (NC == 2) {
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(src));
    out[0] = a.x, out[1] = a.y;
  } else {
    static_assert(NC == 1);
    out[0] = __bfloat162float(*src);
  }
}
template <int NC>
__device__ __forceinline__ void load_f32(const float* src, float* out) {
  if constexpr (NC == 8) {
    load_f32<4>(src, out);
    load_f32<4>(src + 4, out + 4);
  } else if constexpr (NC == 4) {
    const float4 a = *reinterpret_cast<const float4*>(src);
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
  } else if constexpr (NC == 2) {
    const float2 a = *reinterpret_cast<const float2*>(src);
    out[0] = a.x, out[1] = a.y;
  } else {
    static_assert(NC == 1);
    out[0] = *src;
  }
}
template <int NC>
__device__ __forceinline__ void store_f32(float* dst, const float* in) {
  if constexpr (NC == 4) *reinterpret_cast<float4*>(dst) = make_float4(in[0], in[1], in[2], in[3]);
  else if constexpr (NC == 2) *reinterpret_cast<float2*>(dst) = make_float2(in[0], in[1]);
  else *dst = in[0];
}

// y_exact and y_lin at element i (4 of them), as mix_value reads them.
__device__ __forceinline__ void mix_inputs4(HybridMix mix, const bf16* y_exact, const bf16* y_lin,
                                            long i, float (&ye)[4], float (&yl)[4]) {
  for (int x = 0; x < 4; ++x) ye[x] = yl[x] = 0.0f;
  if (mix != HybridMix::linear) load_row_part<4>(y_exact + i, ye);
  if (mix != HybridMix::exact) load_row_part<4>(y_lin + i, yl);
}

// One warp per (t, h) row, four consecutive columns a lane (D % 4 = 0, rows 16-byte aligned):
// dy_exact = a·g, dy_lin = b·g, and the coefficient's gradient. With a teacher,
// g = factor · (y − t) is recomputed in place (the fused NMSE backward), else g = dy.
__global__ void mix_backward_kernel(float* dy_exact, bf16* dy_lin, float* dcoef, int dcoef_stride,
                                    HybridMix mix, const float* dy, const double* sums,
                                    float scale, const bf16* teacher, const bf16* y_exact,
                                    const bf16* y_lin, const float* lambda, const float* gamma,
                                    long rows, int H, int D) {
  const float factor = teacher ? (float)(2.0 / fmax(sums[1], 1e-12)) * scale : 0.0f;
  const int lane = threadIdx.x % 32;
  for (long row = (blockIdx.x * (long)blockDim.x + threadIdx.x) / 32; row < rows;
       row += (long)gridDim.x * blockDim.x / 32) {
    const int h = (int)(row % H);
    const MixCoef c = mix_coef(mix, lambda, gamma, row, h);
    float dc = 0.0f;
    for (int d = lane * 4; d < D; d += 128) {
      const long i = row * D + d;
      float ye[4], yl[4], g[4];
      mix_inputs4(mix, y_exact, y_lin, i, ye, yl);
      if (teacher) {
        float t[4];
        load_row_part<4>(teacher + i, t);
#pragma unroll
        for (int x = 0; x < 4; ++x) g[x] = factor * ((c.a * ye[x] + c.b * yl[x]) - t[x]);
      } else {
        load_f32<4>(dy + i, g);
      }
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        if (mix == HybridMix::gate) dc += g[x] * (yl[x] - ye[x]);
        else if (mix == HybridMix::scale) dc += g[x] * yl[x];
      }
      if (dy_exact) {
        const float a[4] = {c.a * g[0], c.a * g[1], c.a * g[2], c.a * g[3]};
        store_f32<4>(dy_exact + i, a);
      }
      if (dy_lin)
        *reinterpret_cast<uint2*>(dy_lin + i) =
            make_uint2(device::pack_bf16(c.b * g[0], c.b * g[1]),
                       device::pack_bf16(c.b * g[2], c.b * g[3]));
    }
    dc = device::warp_sum(dc);
    if (lane == 0 && (mix == HybridMix::gate || mix == HybridMix::scale)) {
      const long t = row / H;
      dcoef[t * dcoef_stride + h] = mix == HybridMix::gate ? dc * c.b * (1.0f - c.b) : dc;
    }
  }
}

// nmse_partial_kernel of y = a·y_exact + b·y_lin, computed as mix_forward_kernel: one warp per
// row as mix_backward_kernel, a fixed grid (the partial sums of block b are always the same rows').
__global__ void mix_nmse_partial_kernel(double* partial, HybridMix mix, const bf16* y_exact,
                                        const bf16* y_lin, const float* lambda, const float* gamma,
                                        const bf16* t, long rows, int H, int D) {
  __shared__ double scratch[32];
  double err = 0.0, ref = 0.0;
  const int lane = threadIdx.x % 32;
  for (long row = (blockIdx.x * (long)blockDim.x + threadIdx.x) / 32; row < rows;
       row += (long)gridDim.x * blockDim.x / 32) {
    const MixCoef c = mix_coef(mix, lambda, gamma, row, (int)(row % H));
    for (int d = lane * 4; d < D; d += 128) {
      const long i = row * D + d;
      float ye[4], yl[4], tv[4];
      mix_inputs4(mix, y_exact, y_lin, i, ye, yl);
      load_row_part<4>(t + i, tv);
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        const double e = (double)(c.a * ye[x] + c.b * yl[x]) - tv[x];
        err += e * e;
        ref += (double)tv[x] * tv[x];
      }
    }
  }
  err = block_sum_double(err, scratch);
  ref = block_sum_double(ref, scratch);
  if (threadIdx.x == 0) partial[2 * blockIdx.x] = err, partial[2 * blockIdx.x + 1] = ref;
}


// ---- fused decode step ---------------------------------------------------------------------

// The exact branch's keys at position pos: j < sinks, then pos − window < j ≤ pos; key idx of n.
struct ExactKeys {
  long n_sink, w_begin;
  int n;
  __device__ ExactKeys(long pos, int sinks, int window, bool has_exact)
      : n_sink(min((long)sinks, pos + 1)), w_begin(max((long)sinks, pos - window + 1)),
        n(has_exact ? (int)(n_sink + max(0L, pos - w_begin + 1)) : 0) {}
  __device__ long operator()(int idx) const { return idx < n_sink ? (long)idx : w_begin + (idx - n_sink); }
};

// The decode kernel's tuning: of the R = D / 8 state rows a warp owns, kSmemRows sit in shared
// memory (cp.async'd at the kernel's start, so their reads overlap the whole front end) and the
// rest in registers; the registers are bounded for kMinBlocks blocks of 256 threads per SM; the
// exact output visits kKeysPerPass keys per warp and pass, their loads issued together.
// CS: the blocks a head's columns are split over (1: one block holds all D columns).
template <int D, int CS>
struct DecodeTuning {
  // D = 128: 8 of the 16 rows in shared memory (32 KiB a block), 64 registers: 4 blocks per SM
  // (the register file and 200 of the 228 KiB of shared memory). D = 64: all in registers, 3.
  // Split (CS > 1, D / CS columns a block): every row in shared memory (D · DC floats, 16 KiB at
  // D = 128), where the update by the token leaving the window runs before the wait (below).
  // Split blocks run at most 2 an SM (decode_launch): 3 leave them 80 registers, and room beside
  // them for three of the o product's GEMV blocks.
  static constexpr int kSmemRows = CS > 1 ? D / 8 : D >= 128 ? D / 16 : 0;
  static constexpr int kMinBlocks = CS > 1 ? 3 : D >= 128 ? 4 : 3;
  static constexpr int kKeysPerPass = 4;
  // Split ("staged"): before the wait for the qkv product (launched dependent:
  // HybridDecodeLaunch) a block copies into shared memory (cp.async) the exact branch's key rows
  // and value columns, its gate rows (NR · C bf16) and its state columns, holds the conv's
  // weights and history rows in registers and, with window > 0, applies the update by the token
  // leaving the window (its rows are in the cache); after the wait the front end is one round
  // trip (x and this token's rows) and the scores and exact output read no global memory. The
  // window's staging was −0.11 ms a batch-1 8B step (BENCHMARKS.md session 23: each of those
  // phases had been a chain of round trips), the dependent launch −0.10 to −0.12 (session 24);
  // the state's staging, which had cost +0.11 ms beside the front end's loads in session 23, is
  // even before the wait. Unsplit blocks (4 an SM) have no room for the rows and ask them into L2.
  static constexpr bool kStaged = CS > 1;
};

// The decode kernel's dynamic shared memory for `keys` = sinks + window + 1: the state rows held
// there (8·kSmemRows·DC floats), the scores (keys floats), then, staged, the keys' rows (keys·D
// bf16), the values' columns (keys·DC bf16) and the gate rows (gate_elems = NR·C bf16); every
// section 16-byte aligned.
template <int D, int CS>
struct DecodeSmem {
  using T = DecodeTuning<D, CS>;
  static constexpr int DC = D / CS;
  static constexpr size_t kStateRows = (size_t)8 * T::kSmemRows * DC * sizeof(float);  // the scores' offset
  __host__ __device__ static size_t k_rows(int keys) { return kStateRows + ((size_t)keys * 4 + 15) / 16 * 16; }
  __host__ __device__ static size_t v_rows(int keys) { return k_rows(keys) + (T::kStaged ? (size_t)keys * D * 2 : 0); }
  __host__ __device__ static size_t g_rows(int keys) { return v_rows(keys) + (T::kStaged ? (size_t)keys * DC * 2 : 0); }
  __host__ __device__ static size_t bytes(int keys, long gate_elems) {
    return g_rows(keys) + (T::kStaged ? (size_t)gate_elems * 2 : 0);
  }
};
// The most dynamic shared memory a staged block asks for (the static arrays take ≈ 20 KB more);
// a window whose rows do not fit runs unsplit.
inline constexpr size_t kDecodeStagedSmemMax = 160 * 1024;

// grid (H, B, CS), 256 threads: block (h, b, z) owns query head h (kv head h / (H / G)) of
// sequence b and the DC = D / CS columns [z·DC, z·DC + DC) of its state and output: the front end
// (conv, gates, norms, RoPE, scores over all D dims) in each of the CS blocks, then its columns
// (warp w holds state rows [wR, wR + R), lane the NC consecutive columns [lane·NC, lane·NC + NC)
// of the block's, read and written as one 16-, 8- or 4-byte access per row). Every sum is taken
// in the same order whatever CS: the split changes no bit of the output or the state. CS > 1
// spreads a batch of few heads over more SMs (one sequence: 32 heads on 132; decode_launch).
// Few values stay live across the kernel so that DecodeTuning's blocks fit an SM: the cache
// view, the head's parameters and the row leaving the window wait in shared memory (the last two
// loaded at the start, beside the conv rows). The block of a sequence that finishes last
// advances its cache.position (one launch per token). Dynamic shared memory: DecodeSmem.
template <int D, int NR, bool kBatch, int CS>
__global__ void __launch_bounds__(256, DecodeTuning<D, CS>::kMinBlocks) hybrid_decode_kernel(
    bf16* __restrict__ y, HybridParams p, HybridCacheView one,
    const HybridCacheView* __restrict__ caches, const bf16* __restrict__ x,
    const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v, int C,
    int H, int G, int sinks, int window, HybridMix mix, bool linear_rope, bool count_far) {
  device::pdl_trigger();  // the o projection's GEMV may start (its blocks wait for this one)
  constexpr int R = D / 8;     // state rows per warp
  constexpr int DC = D / CS;   // the block's state and output columns
  constexpr int NC = DC / 32;  // of them per lane
  constexpr int RS = DecodeTuning<D, CS>::kSmemRows, RG = R - RS;  // rows in shared memory, registers
  constexpr int KU = DecodeTuning<D, CS>::kKeysPerPass;
  static_assert(D <= 256 && RG >= 0 && NC >= 1 && DC % 32 == 0 && (RS == 0 || RG == 0 || NC == 4),
                "one row of D per thread; 16-byte copies");
  constexpr bool kStaged = DecodeTuning<D, CS>::kStaged;
  using Smem = DecodeSmem<D, CS>;
  extern __shared__ float4 dynamic_smem[];
  char* const smem_base = reinterpret_cast<char*>(dynamic_smem);
  float* const srows = reinterpret_cast<float*>(smem_base);  // (8, RS, DC)
  float* const scores = reinterpret_cast<float*>(smem_base + Smem::kStateRows);
  const int keys_max = sinks + window + 1;
  bf16* const kstage = reinterpret_cast<bf16*>(smem_base + Smem::k_rows(keys_max));  // staged: (keys, D)
  bf16* const vstage = reinterpret_cast<bf16*>(smem_base + Smem::v_rows(keys_max));  // (keys, DC)
  bf16* const gstage = reinterpret_cast<bf16*>(smem_base + Smem::g_rows(keys_max));  // (NR, C)
  __shared__ __align__(16) float qc[D], kc[D], vc[D], qn[D], kn[D], qr[D], kr[D], kl[D], vl[D];
  __shared__ __align__(16) float raw[3][D];  // this token's q, k, v rows as they came (conv history)
  __shared__ float red[8][5], stat[2], hp[7], gb[2];
  __shared__ long spos;
  __shared__ __align__(16) float part_r[8][D], part_o[8][D], part_y[8][D];
  __shared__ __align__(16) unsigned char view[sizeof(HybridCacheView)];
  HybridCacheView& cache = *reinterpret_cast<HybridCacheView*>(view);
  // Before pdl_wait the block reads only what no kernel of this step writes before it: the
  // weights, and this layer's cache (its position, view, state, window and conv history are
  // written by this kernel alone, in earlier steps). Launched dependent (HybridDecodeLaunch), that
  // part runs while the qkv product ends; x, q, k, v, which the kernels before it write, are read
  // after the wait.
  const long pos = *(kBatch ? caches[blockIdx.y].position : one.position);
  const int h = blockIdx.x, seq = blockIdx.y, split = blockIdx.z, group = H / G, hk = h / group;
  const bool leader = h % group == 0;
  const bool has_exact = mix != HybridMix::linear, has_linear = mix != HybridMix::exact;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int lc = lane * NC, gc = split * DC + lc;  // its columns: in the block's, in the head's
  // The sequence's cache view into shared memory, read from there after each barrier rather than
  // held in 28 registers (one sequence: from the kernel parameter).
  if (tid == 0) {
    if constexpr (kBatch) cache = caches[seq];
    else cache = one;
  }
  // The head's parameters (hp: A_log, dt_bias, b_beta, b_λ, c_lse, a_far, γ; those the mix reads)
  // and this thread's RoPE frequency, asked for before anything waits.
  float param = 0.0f;
  if (tid < 7) {
    const bool gate = mix == HybridMix::gate;
    const float* src = tid == 0   ? (has_linear ? p.A_log : nullptr)
                       : tid == 1 ? (has_linear ? p.dt_bias : nullptr)
                       : tid == 2 ? (has_linear ? p.b_beta : nullptr)
                       : tid == 3 ? (gate ? p.b_lambda : nullptr)
                       : tid == 4 ? (gate ? p.c_lse : nullptr)
                       : tid == 5 ? (gate && count_far ? p.a_far : nullptr)
                                  : (mix == HybridMix::scale ? p.gamma : nullptr);
    if (src) param = src[h];
  }
  const float freq = tid < D ? p.inv_freq[tid % (D / 2)] : 0.0f;
  // The gate rows (a, b, λ: NR = 3; a, b: 2; none: 0): their dot products with x wait for x.
  // Staged, each thread copies the 16-byte pieces it will read (C % 8 == 0 and 16-byte aligned
  // rows: decode_launch), a commit group of their own; else they are asked into L2.
  const bf16* wrow[3];
#pragma unroll
  for (int r = 0; r < NR; ++r)
    wrow[r] = p.w_gates + ((long)(r == 2 ? p.lambda_row : r * H) + h) * C;
  const int C8 = C / 8;
  if constexpr (kStaged) {
#pragma unroll
    for (int r = 0; r < NR; ++r)
      for (int c8 = tid; c8 < C8; c8 += 256) device::cp_async16(gstage + r * C + c8 * 8, wrow[r] + c8 * 8, true);
    device::cp_async_commit();
  } else if (NR > 0) {
    const int lines = C * 2 / 128 + 2;  // 128-byte lines a row touches, at most
    for (int i = tid; i < NR * lines; i += 256) {
      const size_t begin = reinterpret_cast<size_t>(wrow[i / lines]);
      const size_t line = (begin & ~size_t{127}) + (size_t)(i % lines) * 128;
      if (line < begin + (size_t)C * 2)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(reinterpret_cast<const char*>(line)));
    }
  }
  __syncthreads();  // the view
  const int ring = window + 1;
  // Staged: the exact keys' rows (keys and the block's value columns; not this token's, which
  // comes from the conv rows) copied into shared memory now, waited for before the scores. Their
  // reads overlap the front end.
  if constexpr (kStaged) {
    if (has_exact) {
      const ExactKeys keys(pos, sinks, window, true);
      const int w_slot = (int)(keys.w_begin % ring);  // the first window key's ring slot
      constexpr int kK = D / 8, kV = DC / 8;          // 16-byte pieces of a key row, a value part
      for (int i = tid; i < keys.n * (kK + kV); i += 256) {
        const int idx = i / (kK + kV), piece = i % (kK + kV);
        if (keys(idx) == pos) continue;
        const bool sink = idx < keys.n_sink;
        int slot = w_slot + (idx - (int)keys.n_sink);
        if (slot >= ring) slot -= ring;
        const long row = ((long)(sink ? idx : slot) * G + hk) * D;
        if (piece < kK)
          device::cp_async16(kstage + idx * D + piece * 8, (sink ? cache.sink_k : cache.ring_k) + row + piece * 8, true);
        else
          device::cp_async16(vstage + idx * DC + (piece - kK) * 8,
                             (sink ? cache.sink_v : cache.ring_v) + row + split * DC + (piece - kK) * 8, true);
      }
    }
    device::cp_async_commit();
  }
  // The state's rows held in shared memory copied in now; the lines of those held in registers
  // and (unstaged) the exact rows of this kv head asked into L2: their DRAM reads overlap the
  // front end.
  if (has_linear) {
    const float* S0 = cache.state + (long)h * D * D + split * DC;
    if constexpr (RG == 0) {  // every row: any thread's pieces (read after a barrier)
      constexpr int kP = DC / 4;  // 16-byte pieces of a row's columns
      for (int i = tid; i < D * kP; i += 256)
        device::cp_async16(srows + (i / kP) * DC + (i % kP) * 4, S0 + (long)(i / kP) * D + (i % kP) * 4, true);
      device::cp_async_commit();
    } else if constexpr (RS > 0) {  // the thread's own (read back by it alone: no barrier)
#pragma unroll
      for (int i = 0; i < RS; ++i)
        device::cp_async16(srows + (warp * RS + i) * DC + lc, S0 + (long)(warp * R + RG + i) * D + lc, true);
      device::cp_async_commit();
    }
    if constexpr (RG > 0) {
      constexpr int kRowLines = DC * 4 / 128;  // 128-byte lines per fp32 row part
      for (int idx = tid; idx < 8 * RG * kRowLines; idx += 256) {
        const int row = idx / kRowLines / RG * R + idx / kRowLines % RG;
        asm volatile("prefetch.global.L2 [%0];" ::"l"(reinterpret_cast<const char*>(S0 + (long)row * D) + idx % kRowLines * 128));
      }
    }
  }
  if (!kStaged && has_exact) {
    constexpr int kLines = D * 2 / 128 > 0 ? D * 2 / 128 : 1;  // 128-byte lines per bf16 row
    const int rows = ring + sinks;
    for (int idx = tid; idx < 2 * rows * kLines; idx += 256) {
      const int kv = idx / (rows * kLines), row = idx / kLines % rows, line = idx % kLines;
      const bf16* base = row < ring ? (kv ? cache.ring_v : cache.ring_k) + ((long)row * G + hk) * D
                                    : (kv ? cache.sink_v : cache.sink_k) + ((long)(row - ring) * G + hk) * D;
      asm volatile("prefetch.global.L2 [%0];" ::"l"(reinterpret_cast<const char*>(base) + line * 128));
    }
  }
  // The token leaving the window enters the state (with window 0, this token itself): its unit
  // key, value, decay and β (window > 0) asked for now, kept in kl, vl once the conv rows are done.
  const long leaving = pos - window;
  const bool enters = has_linear && leaving >= sinks && leaving >= 0;
  float kl_now = 0.0f, vl_now = 0.0f, g_leave = 0.0f, b_leave = 0.0f;
  if (enters && window > 0) {
    const long slot = leaving % ring;
    if (tid < D) {
      kl_now = __bfloat162float(cache.ring_key[(slot * G + hk) * (long)D + tid]);
      vl_now = __bfloat162float(cache.ring_v[(slot * G + hk) * (long)D + tid]);
    }
    g_leave = cache.ring_g[slot * H + h];
    b_leave = cache.ring_beta[slot * H + h];
  }
  // The short conv's weights and the raw rows of the last 3 tokens (conv history), of the
  // (row, dim) pairs idx = tid + 256·i < 3·D this thread convolves: staged, now; else after the
  // gate logits (the registers of 4 blocks an SM do not hold them across those).
  constexpr int kConvIters = (3 * D + 255) / 256;
  float cw[kConvIters][kConvWidth], chist[kConvIters][3];
  auto conv_inputs = [&] {
#pragma unroll
    for (int it = 0; it < kConvIters; ++it) {
      const int idx = tid + 256 * it, which = idx / D, d = idx % D;
      const float* w = which == 0 ? p.conv_q : which == 1 ? p.conv_k : p.conv_v;
      if (idx < 3 * D && w) {
        const float* hist = which == 0 ? cache.conv_q : which == 1 ? cache.conv_k : cache.conv_v;
        const int heads = which == 0 ? H : G, head = which == 0 ? h : hk;
        const long ch = (long)head * D + d;
#pragma unroll
        for (int i = 0; i < kConvWidth; ++i) cw[it][i] = w[ch * kConvWidth + i];
#pragma unroll
        for (int i = 0; i < 3; ++i) {
          const long j = pos - 3 + i;
          chist[it][i] = j >= 0 ? hist[((j % 4) * heads + head) * (long)D + d] : 0.0f;
        }
      }
    }
  };
  if constexpr (kStaged) conv_inputs();
  // The linear branch's state: rows i < RG of a warp's slice in registers, the rest in shared
  // memory; every sum over rows in row order. S and Ss are computed where used rather than held
  // across the front end.
  auto S = [&] { return cache.state + (long)h * D * D + gc; };
  auto Ss = [&] { return srows + warp * RS * DC + lc; };
  float sreg[RG > 0 ? RG : 1][NC];
  // part[warp] = Σ_rows vec[row] S[row] over this warp's rows (Sᵀ kls for the update, Sᵀ q̂ for
  // the output; without a linear branch the register rows are zero and the others not read).
  auto state_dot = [&](const float* vec, float (*part)[D]) {
    float r[NC];
#pragma unroll
    for (int c = 0; c < NC; ++c) r[c] = 0.0f;
#pragma unroll
    for (int i = 0; i < RG; ++i)
#pragma unroll
      for (int c = 0; c < NC; ++c) r[c] += vec[warp * R + i] * sreg[i][c];
    if (RS > 0 && has_linear) {
#pragma unroll
      for (int i = 0; i < RS; ++i) {
        float s[NC];
        load_f32<NC>(Ss() + i * DC, s);
#pragma unroll
        for (int c = 0; c < NC; ++c) r[c] += vec[warp * R + RG + i] * s[c];
      }
    }
#pragma unroll
    for (int c = 0; c < NC; ++c) part[warp][lc + c] = r[c];
  };
  // The delta rule (after a barrier on part_r): u = b (vls − α Sᵀ kls), S ← α S + kls uᵀ in
  // registers, shared memory and the cache.
  auto state_update = [&](const float* kls, const float* vls, float alpha, float b) {
    float u[NC];
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      float r = 0.0f;
#pragma unroll
      for (int w = 0; w < 8; ++w) r += part_r[w][lc + c];
      u[c] = b * (vls[gc + c] - alpha * r);
    }
#pragma unroll
    for (int i = 0; i < RG; ++i) {
#pragma unroll
      for (int c = 0; c < NC; ++c) sreg[i][c] = alpha * sreg[i][c] + kls[warp * R + i] * u[c];
      store_f32<NC>(S() + (long)(warp * R + i) * D, sreg[i]);
    }
#pragma unroll
    for (int i = 0; i < RS; ++i) {
      float s[NC];
      load_f32<NC>(Ss() + i * DC, s);
#pragma unroll
      for (int c = 0; c < NC; ++c) s[c] = alpha * s[c] + kls[warp * R + RG + i] * u[c];
      store_f32<NC>(S() + (long)(warp * R + RG + i) * D, s);
      store_f32<NC>(Ss() + i * DC, s);
    }
  };
  // The leaving token's key and value into kl, vl (visible after the next barrier): staged now,
  // unsplit after the gate logits (its registers do not hold them across those).
  if (kStaged && tid < D) kl[tid] = kl_now, vl[tid] = vl_now;
  // Staged with window > 0: the token entering the state is the one leaving the window, whose
  // rows the cache holds, so the update runs now (the state in shared memory, copied above).
  const bool early_update = kStaged && enters && window > 0;
  if (early_update) {
    device::cp_async_wait<0>();
    __syncthreads();  // kl, vl, the state's rows
    state_dot(kl, part_r);
    __syncthreads();  // part_r
    state_update(kl, vl, expf(g_leave), b_leave);
  }

  device::pdl_wait();  // x, q, k, v written
  // 1 gate logits: NR dot products of length C, x's 16-byte loads issued together (beside this
  //   token's q, k, v rows for the conv), the rows' from shared memory (staged) or L2.
  float now_v[kConvIters];
  auto now_rows = [&] {
#pragma unroll
    for (int it = 0; it < kConvIters; ++it) {
      const int idx = tid + 256 * it, which = idx / D, d = idx % D;
      const int head = which == 0 ? h : hk;
      const bf16* now = which == 0 ? q + (long)seq * H * D : (which == 1 ? k : v) + (long)seq * G * D;
      now_v[it] = idx < 3 * D ? __bfloat162float(now[(long)head * D + d]) : 0.0f;
    }
  };
  if constexpr (kStaged) now_rows();
  const bf16* const x_seq = x + (long)seq * C;
  float part[5] = {0, 0, 0, 0, 0};
  bool aligned = (reinterpret_cast<size_t>(x_seq) & 15) == 0;
#pragma unroll
  for (int r = 0; r < NR; ++r) aligned = aligned && (reinterpret_cast<size_t>(wrow[r]) & 15) == 0;
  if constexpr (kStaged && NR > 0) device::cp_async_wait<1>();  // this thread's gate pieces
  if (NR > 0 && aligned) {
#pragma unroll 2  // C = 4096: both passes' loads in flight together
    for (int c8 = tid; c8 < C8; c8 += 256) {
      const uint4 xv = reinterpret_cast<const uint4*>(x_seq)[c8];
      uint4 av[NR > 0 ? NR : 1];
#pragma unroll
      for (int r = 0; r < NR; ++r)
        av[r] = reinterpret_cast<const uint4*>(kStaged ? gstage + r * C : wrow[r])[c8];
      const __nv_bfloat162* px = reinterpret_cast<const __nv_bfloat162*>(&xv);
#pragma unroll
      for (int r = 0; r < NR; ++r) {
        const __nv_bfloat162* pa = reinterpret_cast<const __nv_bfloat162*>(&av[r]);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 fx = __bfloat1622float2(px[e]), fa = __bfloat1622float2(pa[e]);
          part[r] += fx.x * fa.x + fx.y * fa.y;
        }
      }
    }
  }
  if (NR > 0) {
    for (int c = aligned ? C8 * 8 + tid : tid; c < C; c += 256) {
      const float xc = __bfloat162float(x_seq[c]);
#pragma unroll
      for (int r = 0; r < NR; ++r) part[r] += xc * __bfloat162float(wrow[r][c]);
    }
  }
  // 2 short conv over the raw rows of the last 3 tokens and this one (conv off: the rows as they
  //   are).
  if constexpr (!kStaged) now_rows(), conv_inputs();
#pragma unroll
  for (int it = 0; it < kConvIters; ++it) {
    const int idx = tid + 256 * it, which = idx / D, d = idx % D;
    if (idx >= 3 * D) break;
    const float* w = which == 0 ? p.conv_q : which == 1 ? p.conv_k : p.conv_v;
    raw[which][d] = now_v[it];
    float acc = now_v[it];
    if (w) {
      acc *= cw[it][kConvWidth - 1];
#pragma unroll
      for (int i = 0; i < 3; ++i)
        if (pos - 3 + i >= 0) acc += cw[it][i] * chist[it][i];
    }
    (which == 0 ? qc : which == 1 ? kc : vc)[d] = acc;
  }
  if (!kStaged && tid < D) kl[tid] = kl_now, vl[tid] = vl_now;
  if (tid < 7) hp[tid] = param;
  if (tid == 0) spos = pos;
  __syncthreads();  // conv rows, kl, vl, hp visible
  // 3 RoPE (the exact branch, and the linear branch with linear_rope) and the squared norms of
  //   what the linear branch reads (the RoPE'd rows with linear_rope: one more barrier).
  if (!linear_rope && tid < D) part[3] = qc[tid] * qc[tid], part[4] = kc[tid] * kc[tid];
  if (tid < D) {
    const int d = tid;
    float s, c;
    sincosf((float)pos * freq, &s, &c);
    const int other = d < D / 2 ? d + D / 2 : d - D / 2;
    const float sgn = d < D / 2 ? -1.0f : 1.0f;
    qr[d] = qc[d] * c + sgn * qc[other] * s;
    kr[d] = kc[d] * c + sgn * kc[other] * s;
  }
  if (linear_rope) {
    __syncthreads();
    if (tid < D) part[3] = qr[tid] * qr[tid], part[4] = kr[tid] * kr[tid];
  }
  const float* lq = linear_rope ? qr : qc;
  const float* lk = linear_rope ? kr : kc;
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
  const float g_now = has_linear ? -expf(hp[0]) * device::softplusf_(tot[0] + hp[1]) : 0.0f;
  const float beta_now = has_linear ? device::sigmoidf_(tot[1] + hp[2]) : 0.0f;
  const float inv_q = rsqrtf(tot[3] + kUnitNormEps), inv_k = rsqrtf(tot[4] + kUnitNormEps);
  if (tid < D) qn[tid] = lq[tid] * inv_q, kn[tid] = lk[tid] * inv_k;
  if (tid == 0) gb[0] = g_now, gb[1] = beta_now;
  if constexpr (kStaged) device::cp_async_wait<0>();  // this thread's copies; the barrier: all
  __syncthreads();
  // 4 exact branch scores: keys j < sinks, then t − window < j ≤ t (the current one from smem).
  //   Four threads a key (its D dims as 16-byte pieces of 8, thread sub the pieces sub, sub + 4,
  //   …), two shuffles; every thread's loop runs the same passes (the shuffles' full mask). A warp
  //   a key (five dependent shuffles each, a warp's keys one after another) was 0.02–0.04 ms a
  //   batch-1 8B step slower, 0.03–0.07 at batch 4 (docs/BENCHMARKS.md session 25).
  const float scale = rsqrtf((float)D);
  {
    const ExactKeys keys(pos, sinks, window, has_exact);
    constexpr int kT = 4, kP = D / 8 / kT;  // threads a key, pieces a thread
    const int sub = tid % kT;
    for (int base = 0; base < keys.n; base += 256 / kT) {
      const int idx = base + tid / kT;
      const long j = idx < keys.n ? keys(idx) : -1;
      float s = 0.0f;
      if (j >= 0) {
#pragma unroll
        for (int i = 0; i < kP; ++i) {
          const int c = (i * kT + sub) * 8;  // the piece's first dim
          float kv[8], qv[8];
          if (j == pos) {
            load_f32<8>(kr + c, kv);
          } else if constexpr (kStaged) {
            load_row_part<8>(kstage + idx * D + c, kv);
          } else {
            load_row_part<8>(idx < keys.n_sink ? cache.sink_k + ((long)idx * G + hk) * D + c
                                               : cache.ring_k + ((j % ring) * G + hk) * (long)D + c,
                             kv);
          }
          load_f32<8>(qr + c, qv);
          float piece = qv[0] * kv[0];
#pragma unroll
          for (int e = 1; e < 8; ++e) piece += qv[e] * kv[e];
          s += piece;
        }
      }
      s += __shfl_xor_sync(0xffffffffu, s, 1);
      s += __shfl_xor_sync(0xffffffffu, s, 2);
      if (sub == 0 && j >= 0) scores[idx] = s * scale;
    }
  }
  // 5 linear branch over the state (independent of the scores): the leaving token enters it
  //   (unless done before the wait), then q̂ reads it.
  const float* kls = window == 0 ? kn : kl;  // the entering key and value
  const float* vls = window == 0 ? vc : vl;
  float alpha = 1.0f, b = 0.0f;
  if (enters) {
    if (window == 0) alpha = expf(g_now), b = beta_now;
    else alpha = expf(g_leave), b = b_leave;
  }
  if (has_linear) {  // (zero without a linear branch: not read)
#pragma unroll
    for (int i = 0; i < RG; ++i) load_f32<NC>(S() + (long)(warp * R + i) * D, sreg[i]);
  } else {
#pragma unroll
    for (int i = 0; i < RG; ++i)
#pragma unroll
      for (int c = 0; c < NC; ++c) sreg[i][c] = 0.0f;
  }
  if constexpr (RS > 0 && RG > 0) device::cp_async_wait<0>();  // the thread's own rows
  if (enters && !early_update) state_dot(kls, part_r);
  __syncthreads();  // scores and part_r
  // pos, the key range, the gates and the λ logit read again from shared memory from here on,
  // rather than kept live across the state phase.
  const long pos_l = spos;
  const ExactKeys keys(pos_l, sinks, window, has_exact);
  auto red_total = [&](int i) { float t = 0.0f; for (int w = 0; w < 8; ++w) t += red[w][i]; return t; };
  if (enters && !early_update) state_update(kls, vls, alpha, b);
  state_dot(qn, part_o);
  if (warp == 0 && keys.n > 0) {  // softmax statistics (after the state phase: fewer live registers)
    float m = -INFINITY;
    for (int idx = lane; idx < keys.n; idx += 32) m = fmaxf(m, scores[idx]);
    m = device::warp_max(m);
    float se = 0.0f;
    for (int idx = lane; idx < keys.n; idx += 32) se += expf(scores[idx] - m);
    se = device::warp_sum(se);
    if (lane == 0) stat[0] = m, stat[1] = se;
  }
  __syncthreads();  // stat
  // 6 exact output: warp w sums keys w, w + 8, … (KU per pass, loads together), lane its columns.
  {
    const float m = keys.n > 0 ? stat[0] : 0.0f;
    float ye[NC];
#pragma unroll
    for (int c = 0; c < NC; ++c) ye[c] = 0.0f;
    for (int base = warp; base < keys.n; base += 8 * KU) {
      float vv[KU][NC], pw[KU];
#pragma unroll
      for (int u = 0; u < KU; ++u) {
        const int idx = base + 8 * u;
        const long j = idx < keys.n ? keys(idx) : -1;
        pw[u] = j >= 0 ? expf(scores[idx] - m) : 0.0f;
        if (j == pos_l) {
#pragma unroll
          for (int c = 0; c < NC; ++c) vv[u][c] = vc[gc + c];
        } else if (j >= 0) {
          if constexpr (kStaged)
            load_row_part<NC>(vstage + idx * DC + lc, vv[u]);
          else
            load_row_part<NC>(idx < keys.n_sink ? cache.sink_v + ((long)j * G + hk) * D + gc
                                           : cache.ring_v + ((j % ring) * G + hk) * (long)D + gc,
                              vv[u]);
        } else {
#pragma unroll
          for (int c = 0; c < NC; ++c) vv[u][c] = 0.0f;
        }
      }
#pragma unroll
      for (int u = 0; u < KU; ++u)
#pragma unroll
        for (int c = 0; c < NC; ++c) ye[c] += pw[u] * vv[u][c];
    }
#pragma unroll
    for (int c = 0; c < NC; ++c) part_y[warp][lc + c] = ye[c];
  }
  __syncthreads();
  if (warp == 0) {
    float a = 1.0f, bl = 1.0f;  // y = a·y_exact + bl·y_lin
    if (mix == HybridMix::gate) {
      float z = red_total(NR == 3 ? 2 : 0) + hp[3];  // gate: NR = 3, the λ row last
      if (p.c_lse) z -= hp[4] * (stat[0] + logf(stat[1]));
      const long n_far = count_far ? pos_l - sinks - window + 1 : 1;  // tokens in the state
      if (count_far && n_far > 0) z += hp[5] * logf((float)n_far);
      const float lambda = n_far > 0 ? device::sigmoidf_(z) : 0.0f;
      a = 1.0f - lambda, bl = lambda;
    } else if (mix == HybridMix::scale) {
      bl = hp[6];
    } else if (mix == HybridMix::exact) {
      bl = 0.0f;
    } else if (mix == HybridMix::linear) {
      a = 0.0f;
    }
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      float ye = 0.0f, yl = 0.0f;
#pragma unroll
      for (int w = 0; w < 8; ++w) ye += part_y[w][lc + c], yl += part_o[w][lc + c];
      if (keys.n > 0) ye /= stat[1];
      y[((long)seq * H + h) * D + gc + c] = __float2bfloat16(a * ye + bl * yl);
    }
  }
  // 7 this token into the cache (slots no block reads in this step), by the head's first block.
  if (split == 0) {
    const long slot = pos_l % ring;
    for (int d = tid; d < D; d += 256) {
      if (p.conv_q) cache.conv_q[((pos_l % 4) * H + h) * (long)D + d] = raw[0][d];
      if (leader) {
        if (p.conv_k) {
          cache.conv_k[((pos_l % 4) * G + hk) * (long)D + d] = raw[1][d];
          cache.conv_v[((pos_l % 4) * G + hk) * (long)D + d] = raw[2][d];
        }
        cache.ring_k[(slot * G + hk) * (long)D + d] = __float2bfloat16(kr[d]);
        cache.ring_v[(slot * G + hk) * (long)D + d] = __float2bfloat16(vc[d]);
        cache.ring_key[(slot * G + hk) * (long)D + d] = __float2bfloat16(kn[d]);
        if (pos_l < sinks) {
          cache.sink_k[(pos_l * G + hk) * (long)D + d] = __float2bfloat16(kr[d]);
          cache.sink_v[(pos_l * G + hk) * (long)D + d] = __float2bfloat16(vc[d]);
        }
      }
    }
    if (tid == 0) {
      cache.ring_g[slot * H + h] = gb[0];
      cache.ring_beta[slot * H + h] = gb[1];
    }
  }
  // 8 the last block of this sequence to finish advances its position (every block has read it).
  __syncthreads();
  if (tid == 0) {
    __threadfence();
    const unsigned ticket = atomicAdd(cache.step_done, 1u);
    if (ticket == gridDim.x * gridDim.z - 1) {
      *cache.position = pos_l + 1;
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

Status hybrid_gates_forward(float* g, float* beta, float* lambda, const float* logits, int R,
                            int lambda_row, const float* A_log, const float* dt_bias,
                            const float* b_beta, const float* b_lambda, const float* c_lse,
                            const float* lse, const float* a_far, int far_start, int T, int H,
                            cudaStream_t stream, bool lambda_logit) {
  if (lambda && lambda_row < 0) return make_error("hybrid_gates_forward: λ without a λ row");
  if (lambda && !lambda_logit && far_start >= 0 && !a_far)
    return make_error("hybrid_gates_forward: far count without a_far");
  if (T <= 0 || (!g && !beta && !lambda)) return ok_status();
  gates_kernel<<<grid_for((long)T * H, 256), 256, 0, stream>>>(g, beta, lambda, logits, R,
                                                               lambda_row, A_log, dt_bias, b_beta,
                                                               b_lambda, c_lse, lse, a_far,
                                                               far_start, T, H, lambda_logit);
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
  hybrid_cache_fill_kernel<<<dim3(grid_for(widest, 256), 3), 256, 0, stream>>>(
      cache, q, k, v, kr, vc, s.has_linear() ? kn : nullptr, s.has_linear() ? g : nullptr,
      beta, T, s.H, s.G, s.D, s.sinks, s.window);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

namespace {
// One launch of hybrid_decode_kernel with CS column splits, grid (H, B, CS).
template <int Dc, int CS>
Status decode_launch_split(bf16* y, const HybridShape& s, const HybridParams& p,
                           const HybridCacheView& one, const HybridCacheView* caches, int B,
                           const bf16* x, const bf16* q, const bf16* k, const bf16* v,
                           cudaStream_t stream, bool dependent) {
  const size_t smem = DecodeSmem<Dc, CS>::bytes(s.sinks + s.window + 1, (long)(p.R / s.H) * s.C);
  auto launch = [&](auto kernel) -> Status {
    // Past 48 KiB with the static arrays. Unsplit with state rows there, the SM's memory as
    // shared memory, so that DecodeTuning's 4 blocks per SM are not held back by the L1
    // carveout; a grid of at most one block an SM (one sequence, split) asks for the carveout of
    // the kernels around it (launch.h's kDependentCarveout: an SM then does not drain between
    // them; measured at batch 1 only); more blocks, the default.
    const bool one_per_sm = (long)s.H * B * CS <= sm_count();
    const int carveout = CS == 1 && DecodeSmem<Dc, CS>::kStateRows > 0 ? (int)cudaSharedmemCarveoutMaxShared
                         : one_per_sm                                   ? kDependentCarveout
                                                                        : (int)cudaSharedmemCarveoutDefault;
    if (smem > 16 * 1024)
      GL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    GL_CUDA_CHECK(launch_kernel(carveout, dependent, kernel, dim3(s.H, B, CS), dim3(256), smem, stream,
                                y, p, one, caches, x, q, k, v, s.C, s.H, s.G, s.sinks, s.window,
                                s.mix, s.linear_rope, s.count_far));
    GL_CUDA_CHECK_LAUNCH();
    return ok_status();
  };
  // The gate rows present (w_a, w_b, w_λ): a compile-time count, so that their loads issue
  // together.
  const bool batch = caches != nullptr;
  switch (p.R / s.H) {
    case 3: return batch ? launch(hybrid_decode_kernel<Dc, 3, true, CS>) : launch(hybrid_decode_kernel<Dc, 3, false, CS>);
    case 2: return batch ? launch(hybrid_decode_kernel<Dc, 2, true, CS>) : launch(hybrid_decode_kernel<Dc, 2, false, CS>);
    case 0: return batch ? launch(hybrid_decode_kernel<Dc, 0, true, CS>) : launch(hybrid_decode_kernel<Dc, 0, false, CS>);
    default: return make_error("hybrid_decode_step: ", p.R, " gate rows for ", s.H, " heads");
  }
}

Status decode_launch(bf16* y, const HybridShape& s, const HybridParams& p,
                     const HybridCacheView& one, const HybridCacheView* caches, int B,
                     const bf16* x, const bf16* q, const bf16* k, const bf16* v,
                     cudaStream_t stream, const HybridDecodeLaunch& how) {
  const int column_splits = how.column_splits;
  if (s.sinks < 0 || s.window < 0 || s.sinks + s.window + 1 > kHybridDecodeMaxKeys)
    return make_error("hybrid_decode_step: sinks ", s.sinks, " + window ", s.window,
                      " outside 0 ≤ sinks + window < ", kHybridDecodeMaxKeys);
  if (!s.has_exact() && s.sinks + s.window != 0)
    return make_error("hybrid_decode_step: no exact branch needs sinks = window = 0");
  if (s.G <= 0 || s.H % s.G != 0) return make_error("hybrid_decode_step: G must divide H");
  if (column_splits != 0 && column_splits != 1 && column_splits != s.D / 32)
    return make_error("hybrid_decode_step: column splits ", column_splits, " not 0, 1 or D / 32 = ", s.D / 32);
  if (B <= 0) return ok_status();
  // Split while the heads of the batch fill at most half the SMs (one sequence of 32 heads on
  // 132: 18.8 against 21.1 µs a layer). Four sequences (128 blocks) are slower split (5.10
  // against 5.03 ms a step, BENCHMARKS.md session 15).
  // A split block holds its window's rows in shared memory (DecodeTuning::kStaged): a window too
  // long for that runs unsplit.
  const bool wanted = column_splits == 0 ? 2L * B * s.H <= sm_count() : column_splits > 1;
  return dispatch_head_dim(s.D, [&](auto d) -> Status {
    constexpr int Dc = decltype(d)::value, kSplit = Dc / 32;
    const bool split = wanted && s.C % 8 == 0 && reinterpret_cast<size_t>(p.w_gates) % 16 == 0 &&
                       DecodeSmem<Dc, kSplit>::bytes(s.sinks + s.window + 1, (long)(p.R / s.H) * s.C) <= kDecodeStagedSmemMax;
    return split ? decode_launch_split<Dc, kSplit>(y, s, p, one, caches, B, x, q, k, v, stream, how.dependent)
                 : decode_launch_split<Dc, 1>(y, s, p, one, caches, B, x, q, k, v, stream, how.dependent);
  });
}

}  // namespace

Status hybrid_decode_step(bf16* y, const HybridShape& s, const HybridParams& p,
                          const HybridCacheView& cache, const bf16* x, const bf16* q,
                          const bf16* k, const bf16* v, cudaStream_t stream,
                          const HybridDecodeLaunch& how) {
  return decode_launch(y, s, p, cache, nullptr, 1, x, q, k, v, stream, how);
}

Status hybrid_decode_step_batch(bf16* y, const HybridShape& s, const HybridParams& p,
                                const HybridCacheView* caches, int B, const bf16* x,
                                const bf16* q, const bf16* k, const bf16* v,
                                cudaStream_t stream, const HybridDecodeLaunch& how) {
  if (!caches) return make_error("hybrid_decode_step_batch: no cache views");
  return decode_launch(y, s, p, HybridCacheView{}, caches, B, x, q, k, v, stream, how);
}
Status hybrid_gates_backward(float* dlogits, int R, int lambda_row, float* dA_log,
                             float* ddt_bias, float* db_beta, float* db_lambda, float* dc_lse,
                             float* dlse, float* da_far, const float* dg, const float* dbeta,
                             const float* logits, const float* g, const float* beta,
                             const float* A_log, const float* dt_bias, const float* c_lse,
                             const float* lse, int far_start, int T, int H, cudaStream_t stream) {
  if (c_lse && (lambda_row < 0 || !lse || !dlse))
    return make_error("hybrid_gates_backward: c_lse needs the λ row, lse and dlse");
  if (far_start >= 0 && lambda_row < 0)
    return make_error("hybrid_gates_backward: the far count needs the λ row");
  if (T <= 0) return ok_status();
  gates_backward_kernel<<<H, kHeadSumThreads, 0, stream>>>(dlogits, R, lambda_row, dA_log, ddt_bias, db_beta,
                                               db_lambda, dc_lse, dlse, da_far, dg, dbeta, logits,
                                               g, beta, A_log, dt_bias, c_lse, lse, far_start, T, H);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status hybrid_head_sum(float* out, const float* src, int stride, int T, int H,
                       cudaStream_t stream) {
  if (T <= 0) return ok_status();
  head_sum_kernel<<<H, kHeadSumThreads, 0, stream>>>(out, src, stride, T, H);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status hybrid_mix_forward(float* y32, bf16* y16, HybridMix mix, const bf16* y_exact,
                          const bf16* y_lin, const float* lambda, const float* gamma, int T, int H,
                          int D, cudaStream_t stream) {
  if (T <= 0) return ok_status();
  mix_forward_kernel<<<grid_for((long)T * H * D, 256), 256, 0, stream>>>(
      y32, y16, mix, y_exact, y_lin, lambda, gamma, (long)T * H, H, D);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

namespace {
// The row kernels of the mixing read and write four columns a lane as one access.
Status check_rows_of_four(const char* what, int D, std::initializer_list<const void*> rows) {
  if (D % 4 != 0) return make_error(what, ": head dim ", D, " is not a multiple of 4");
  for (const void* p : rows)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
      return make_error(what, ": a row buffer is not 16-byte aligned");
  return ok_status();
}
}  // namespace

Status hybrid_mix_backward(float* dy_exact, bf16* dy_lin, float* dcoef, int dcoef_stride,
                           HybridMix mix, const float* dy, const bf16* y_exact, const bf16* y_lin,
                           const float* lambda, const float* gamma, int T, int H, int D,
                           cudaStream_t stream) {
  if (T <= 0) return ok_status();
  GL_TRY(check_rows_of_four("hybrid_mix_backward", D, {dy_exact, dy_lin, dy, y_exact, y_lin}));
  mix_backward_kernel<<<grid_for((long)T * H * 32, 256), 256, 0, stream>>>(
      dy_exact, dy_lin, dcoef, dcoef_stride, mix, dy, nullptr, 0.0f, nullptr, y_exact, y_lin,
      lambda, gamma, (long)T * H, H, D);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status hybrid_mix_nmse_forward(double* sums, HybridMix mix, const bf16* y_exact,
                               const bf16* y_lin, const float* lambda, const float* gamma,
                               const bf16* teacher, int T, int H, int D, void* workspace,
                               size_t workspace_bytes, cudaStream_t stream) {
  if (workspace_bytes < nmse_workspace_bytes())
    return make_error("hybrid_mix_nmse_forward: workspace too small");
  GL_TRY(check_rows_of_four("hybrid_mix_nmse_forward", D, {y_exact, y_lin, teacher}));
  double* partial = static_cast<double*>(workspace);
  mix_nmse_partial_kernel<<<kReduceBlocks, kReduceThreads, 0, stream>>>(
      partial, mix, y_exact, y_lin, lambda, gamma, teacher, (long)T * H, H, D);
  GL_CUDA_CHECK_LAUNCH();
  return nmse_partials_reduce(sums, partial, kReduceBlocks, stream);
}

Status hybrid_mix_nmse_backward(float* dy_exact, bf16* dy_lin, float* dcoef, int dcoef_stride,
                                HybridMix mix, const double* sums, float scale,
                                const bf16* teacher, const bf16* y_exact, const bf16* y_lin,
                                const float* lambda, const float* gamma, int T, int H, int D,
                                cudaStream_t stream) {
  if (T <= 0) return ok_status();
  GL_TRY(check_rows_of_four("hybrid_mix_nmse_backward", D, {dy_exact, dy_lin, teacher, y_exact, y_lin}));
  mix_backward_kernel<<<grid_for((long)T * H * 32, 256), 256, 0, stream>>>(
      dy_exact, dy_lin, dcoef, dcoef_stride, mix, nullptr, sums, scale, teacher, y_exact, y_lin,
      lambda, gamma, (long)T * H, H, D);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}


}  // namespace golinear::kernels::cuda
