// Flash-style masked causal attention (forward and backward) and KV-cache decode attention
// (see attention.h).
//
// Tensor-core path: mma.sync m16n8k16 (bf16 in, fp32 accumulate) with ldmatrix operand loads from
// padded shared tiles (row pitch D + 8 bf16: the 8 rows of an ldmatrix land in 8 different bank
// groups). Scores, probabilities and accumulators stay in registers (the C fragment of S becomes
// the A fragment of P without a shared-memory round trip). Every kernel visits only the key (or
// query) blocks the mask allows and, inside a block, only the interval of 16-wide sub-blocks
// that some row of the warp may see (unrolled per interval length, so the products of a step
// are independent chains without branches): the sink + window mask costs O(T·(s+w)).
// Full causal attention (no mask but causality, D 64 or 128) goes to attention_wgmma.cu; these
// kernels keep the sink + window mask, the mixed epilogue and the decode. Measured (H200, H = 32,
// G = 8, D = 128, 32K tokens): sink + window fwd 0.64 ms, fwd + bwd 2.56 ms; full causal here was
// 44.9 ms fwd, 160 ms fwd + bwd (3.0× and 2.8× SDPA; now 16.4 and 100 ms on wgmma).
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_wgmma.h"

#include <algorithm>
#include <cmath>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/mma_sync.cuh"

namespace golinear::kernels::cuda {

namespace {

constexpr int kTile = 64;     // queries per block row and keys per block column
constexpr int kThreads = 128; // 4 warps, each 16 rows of the 64
using device::kLog2e;

// ---- tensor-core primitives ---------------------------------------------------------------

using device::ldsm_x4;
using device::ldsm_x4_trans;
using device::mma16816;
using device::pack_bf16;
// Fragment addresses inside a tile of pitch LD (bf16): the A operand (or the .trans B operand)
// at (row0, col0) covers rows row0..+15 and cols col0..+15; the non-transposed B operand of two
// n8 tiles stored as rows n0..n0+15 (n) × cols k0..k0+15 (k).
template <int LD>
__device__ __forceinline__ const bf16* frag_a(const bf16* s, int row0, int col0, int lane) {
  return s + (row0 + (lane & 15)) * LD + col0 + (lane >> 4) * 8;
}
template <int LD>
__device__ __forceinline__ const bf16* frag_b(const bf16* s, int n0, int k0, int lane) {
  return s + (n0 + (lane & 7) + ((lane >> 4) << 3)) * LD + k0 + ((lane >> 3) & 1) * 8;
}

// Rows [0, rows) of a (64, D) tile from global rows row0.. (pitch ld elements); rows at or past
// `valid` are zero-filled. cp.async, not committed.
template <int D>
__device__ __forceinline__ void load_tile(bf16* s, const bf16* g, long row0, long ld, int rows,
                                          int valid) {
  constexpr int LD = D + 8, VPR = D / 8;
  for (int idx = threadIdx.x; idx < rows * VPR; idx += kThreads) {
    const int r = idx / VPR, c = idx % VPR;
    const bool ok = r < valid;
    device::cp_async16(s + r * LD + c * 8, ok ? g + (row0 + r) * ld + c * 8 : g, ok);
  }
}

// The mask: may query t see key j?
struct Mask {
  int T, sinks, window;  // window < 0: full causal (sinks unused)
  __device__ __forceinline__ bool allows(int t, int j) const {
    if (j > t || t >= T) return false;
    return window < 0 || j < sinks || j > t - window;
  }
  // May some query of [r0, r0 + 15] see some key of [k0, k0 + 15]?
  __device__ __forceinline__ bool block16(int r0, int k0) const {
    if (k0 > r0 + 15 || r0 >= T) return false;
    return window < 0 || k0 < sinks || k0 + 15 > r0 - window;
  }
  // May every query of [r0, r0 + 15] see every key of [k0, k0 + 63]?
  __device__ __forceinline__ bool full64(int r0, int k0) const {
    if (k0 + kTile - 1 > r0 || r0 + 15 >= T) return false;
    return window < 0 || k0 + kTile - 1 < sinks || k0 > r0 + 15 - window;
  }
};

// The key blocks query block [t0, t0 + 63] visits: the sink blocks, then the window blocks
// (all blocks up to the diagonal for full causal). A sink block outside every row's window span
// loads only its sink rows (rounded up to 16, the sub-block width; the other sub-blocks are
// skipped by every warp and never read).
struct KeyBlocks {
  int n_sink = 0, w_begin = 0, w_raw = 0, count = 0, sinks = 0;
  __device__ KeyBlocks(int t0, int T, int sinks_, int window) : sinks(sinks_) {
    const int last = min(t0 + kTile - 1, T - 1) / kTile;
    if (window >= 0) {
      w_raw = max(0, t0 - window + 1) / kTile;
      n_sink = min((sinks + kTile - 1) / kTile, last + 1);
      w_begin = max(n_sink, w_raw);
    }
    count = n_sink + max(0, last - w_begin + 1);
  }
  __device__ int block(int i) const { return i < n_sink ? i : w_begin + (i - n_sink); }
  __device__ int rows(int kb) const {
    if (kb < n_sink && kb < w_raw) return min(kTile, (sinks - kb * kTile + 15) / 16 * 16);
    return kTile;
  }
};

// ---- forward --------------------------------------------------------------------------------

struct ForwardArgs {
  bf16* y;
  float* lse;
  const bf16 *q, *k, *v;
  int T, H, G, sinks, window;
  // Mixed epilogue (hybrid): y = (1 − λ) · attn + λ · y_lin, y_lin read from y itself for rows
  // t ≥ lin_from (0 before), λ = lambda[t·H + h].
  const float* lambda;
  int lin_from;
  AttentionMixGate gate;  // λ from the row's lse (gate.c_lse set), else lambda holds λ
};

template <int D>
struct FwdSmem {
  static constexpr int LD = D + 8;
  static constexpr size_t tile = (size_t)kTile * LD * 2;
  static constexpr size_t total = 5 * tile;  // Q, K[2], V[2]
};

// One key block for one warp: its NK consecutive needed 16-key sub-blocks from kk0 (a
// compile-time count, so every product of the block is unrolled without branches and the
// 2·NK score tiles accumulate as independent chains). Online softmax on rows gr (x = 0, 1) and
// gr + 8 (x = 2, 3) of the C fragments. MaskT::allows(t, j): may row t see key j (Mask here; the
// decode kernel's key bound).
template <int D, int NK, class MaskT>
__device__ __forceinline__ void forward_step(const bf16* Kb, const bf16* Vb, int kk0, int j0,
                                             int r0, bool full, const MaskT& mask, float scale,
                                             const unsigned (&qf)[D / 16][4],
                                             float (&o)[D / 8][4], float (&m)[2], float (&l)[2],
                                             int lane) {
  constexpr int LD = D + 8, KS = D / 16, NO = D / 8;
  const int gr = lane >> 2, gc = (lane & 3) * 2;
  float s[2 * NK][4];
#pragma unroll
  for (int n = 0; n < 2 * NK; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < KS; ++ks)
#pragma unroll
    for (int kk = 0; kk < NK; ++kk) {
      unsigned b[4];
      ldsm_x4(b, frag_b<LD>(Kb, (kk0 + kk) * 16, ks * 16, lane));
      mma16816(s[2 * kk], qf[ks], b[0], b[1]);
      mma16816(s[2 * kk + 1], qf[ks], b[2], b[3]);
    }
  const int jb = j0 + kk0 * 16;
#pragma unroll
  for (int n = 0; n < 2 * NK; ++n)
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const int t = r0 + gr + (x >> 1) * 8, j = jb + n * 8 + gc + (x & 1);
      s[n][x] = (full || mask.allows(t, j)) ? s[n][x] * scale : -INFINITY;
    }
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float mx = -INFINITY;
#pragma unroll
    for (int n = 0; n < 2 * NK; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * rr], s[n][2 * rr + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m[rr], mx);
    const float m_use = m_new == -INFINITY ? 0.0f : m_new;
    const float corr = exp2f(m[rr] - m_use);
    float sum = 0.0f;
#pragma unroll
    for (int n = 0; n < 2 * NK; ++n) {
      s[n][2 * rr] = exp2f(s[n][2 * rr] - m_use);
      s[n][2 * rr + 1] = exp2f(s[n][2 * rr + 1] - m_use);
      sum += s[n][2 * rr] + s[n][2 * rr + 1];
    }
    l[rr] = l[rr] * corr + sum;
    m[rr] = m_new;
#pragma unroll
    for (int n = 0; n < NO; ++n) o[n][2 * rr] *= corr, o[n][2 * rr + 1] *= corr;
  }
#pragma unroll
  for (int kk = 0; kk < NK; ++kk) {
    const unsigned pa[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]),
                            pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                            pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                            pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
    for (int dn = 0; dn < D / 16; ++dn) {
      unsigned b[4];
      ldsm_x4_trans(b, frag_a<LD>(Vb, (kk0 + kk) * 16, dn * 16, lane));
      mma16816(o[2 * dn], pa, b[0], b[1]);
      mma16816(o[2 * dn + 1], pa, b[2], b[3]);
    }
  }
}

// The needed 16-key sub-blocks of a 64-key block for a warp's 16 rows, as the interval
// [lo, lo + n) (sub-blocks inside it that no row sees are masked, never wrong); n = 0: none.
__device__ __forceinline__ int needed_span(const Mask& mask, int r0, int j0, int& lo) {
  lo = 4;
  int hi = -1;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    if (mask.block16(r0, j0 + kk * 16)) lo = min(lo, kk), hi = kk;
  return hi >= lo ? hi - lo + 1 : 0;
}

// grid (H, ⌈T/64⌉) (query blocks from the last: the longest rows start first), 128 threads.
template <int D, bool kMix>
__global__ void __launch_bounds__(kThreads, 2) flash_forward_kernel(ForwardArgs a) {
  constexpr int LD = D + 8, KS = D / 16, NO = D / 8;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* Qs = reinterpret_cast<bf16*>(smem);
  bf16* Ks = Qs + kTile * LD;  // [2][64][LD]
  bf16* Vs = Ks + 2 * kTile * LD;
  const int h = blockIdx.x, hk = h / (a.H / a.G);
  const int t0 = (gridDim.y - 1 - blockIdx.y) * kTile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r0 = t0 + warp * 16;  // this warp's first query
  const int gr = lane >> 2, gc = (lane & 3) * 2;
  const Mask mask{a.T, a.sinks, a.window};
  const float scale = kLog2e / sqrtf((float)D);
  const long ldq = (long)a.H * D, ldk = (long)a.G * D;

  const KeyBlocks kbs(t0, a.T, a.sinks, a.window);
  load_tile<D>(Qs, a.q + (long)h * D, t0, ldq, kTile, a.T - t0);
  auto load_kv = [&](int i) {
    const int kb = kbs.block(i), j0 = kb * kTile, rows = kbs.rows(kb);
    load_tile<D>(Ks + (i & 1) * kTile * LD, a.k + (long)hk * D, j0, ldk, rows, a.T - j0);
    load_tile<D>(Vs + (i & 1) * kTile * LD, a.v + (long)hk * D, j0, ldk, rows, a.T - j0);
  };
  if (kbs.count > 0) load_kv(0);
  device::cp_async_commit();

  unsigned qf[KS][4];
  float o[NO][4];
#pragma unroll
  for (int n = 0; n < NO; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  for (int i = 0; i < kbs.count; ++i) {
    if (i + 1 < kbs.count) {
      load_kv(i + 1);
      device::cp_async_commit();
      device::cp_async_wait<1>();
    } else {
      device::cp_async_wait<0>();
    }
    __syncthreads();
    if (i == 0) {
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) ldsm_x4(qf[ks], frag_a<LD>(Qs, warp * 16, ks * 16, lane));
    }
    const int j0 = kbs.block(i) * kTile;
    const bf16* Kb = Ks + (i & 1) * kTile * LD;
    const bf16* Vb = Vs + (i & 1) * kTile * LD;
    int lo;
    const int n = needed_span(mask, r0, j0, lo);
    const bool full = mask.full64(r0, j0);
    switch (n) {
      case 1: forward_step<D, 1>(Kb, Vb, lo, j0, r0, full, mask, scale, qf, o, m, l, lane); break;
      case 2: forward_step<D, 2>(Kb, Vb, lo, j0, r0, full, mask, scale, qf, o, m, l, lane); break;
      case 3: forward_step<D, 3>(Kb, Vb, lo, j0, r0, full, mask, scale, qf, o, m, l, lane); break;
      case 4: forward_step<D, 4>(Kb, Vb, lo, j0, r0, full, mask, scale, qf, o, m, l, lane); break;
      default: break;
    }
    __syncthreads();  // this buffer is refilled two iterations on
  }

  device::cp_async_wait<0>();  // nothing in flight when no block was visited
  // Epilogue: normalize, stage the bf16 rows in Qs (free now), then 16-byte stores.
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 1);
    l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 2);
  }
  __syncthreads();
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const float inv = l[rr] > 0.0f ? 1.0f / l[rr] : 0.0f;
    bf16* row = Qs + (warp * 16 + gr + rr * 8) * LD;
#pragma unroll
    for (int n = 0; n < NO; ++n)
      *reinterpret_cast<__nv_bfloat162*>(row + n * 8 + gc) =
          __floats2bfloat162_rn(o[n][2 * rr] * inv, o[n][2 * rr + 1] * inv);
    const int t = r0 + gr + rr * 8;
    if (a.lse && (lane & 3) == 0 && t < a.T)
      a.lse[(long)t * a.H + h] = l[rr] > 0.0f ? (m[rr] + log2f(l[rr])) / kLog2e : -INFINITY;
  }
  __syncwarp();
  constexpr int VPR = D / 8;
  for (int idx = lane; idx < 16 * VPR; idx += 32) {
    const int r = idx / VPR, c = idx % VPR, t = r0 + r;
    if (t >= a.T) continue;
    uint4 val = *reinterpret_cast<const uint4*>(Qs + (warp * 16 + r) * LD + c * 8);
    bf16* dst = a.y + ((long)t * a.H + h) * D + c * 8;
    if constexpr (kMix) {
      float lam = a.lambda[(long)t * a.H + h];
      if (a.gate.c_lse) {  // lambda holds the λ-logit; the lse of this row was stored above
        const long n_far = a.gate.far_start >= 0 ? t - a.gate.far_start + 1 : 1;
        float z = lam - a.gate.c_lse[h] * a.lse[(long)t * a.H + h];
        if (a.gate.far_start >= 0 && n_far > 0) z += a.gate.a_far[h] * logf((float)n_far);
        lam = n_far > 0 ? device::sigmoidf_(z) : 0.0f;
      }
      uint4 lin = make_uint4(0, 0, 0, 0);
      if (t >= a.lin_from) lin = *reinterpret_cast<const uint4*>(dst);
      const __nv_bfloat162* pa = reinterpret_cast<const __nv_bfloat162*>(&val);
      const __nv_bfloat162* pb = reinterpret_cast<const __nv_bfloat162*>(&lin);
      uint4 out;
      __nv_bfloat162* po = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        const float2 fa = __bfloat1622float2(pa[x]), fb = __bfloat1622float2(pb[x]);
        po[x] = __floats2bfloat162_rn((1.0f - lam) * fa.x + lam * fb.x,
                                      (1.0f - lam) * fa.y + lam * fb.y);
      }
      val = out;
    }
    *reinterpret_cast<uint4*>(dst) = val;
  }
}

// ---- backward -------------------------------------------------------------------------------

// One warp per (t, h) row: dsum = Σ_d dy · y (y as the forward stored it), dob = bf16(dy).
template <int D>
__global__ void backward_prepare_kernel(float* __restrict__ dsum, bf16* __restrict__ dob,
                                        const float* __restrict__ dy,
                                        const bf16* __restrict__ y,
                                        const float* __restrict__ dlse, long rows) {
  constexpr int E = D / 32;
  const long row = (blockIdx.x * (long)blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const long base = row * D + lane * E;
  float s = 0.0f;
#pragma unroll
  for (int x = 0; x < E; x += 2) {
    const float2 g = *reinterpret_cast<const float2*>(dy + base + x);
    const float2 o = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(y + base + x));
    s += g.x * o.x + g.y * o.y;
    *reinterpret_cast<__nv_bfloat162*>(dob + base + x) = __floats2bfloat162_rn(g.x, g.y);
  }
  s = device::warp_sum(s);
  if (lane == 0) dsum[row] = dlse ? s - dlse[row] : s;  // ∂lse/∂s_j = p_j: dS = P∘(dP − dsum + dlse)
}

// The backward splits the keys: the window part (keys j ≥ sinks, each seen by the queries
// j .. j + window − 1, or by all later ones for full causal) and the sink part (keys j < sinks,
// seen by every later query: split over chunks of queries, partial sums reduced in a fixed order,
// so the result is deterministic).
struct BackwardMask {
  int T, sinks, window;  // sinks already 0 for full causal
  bool sink_part;
  __device__ __forceinline__ bool allows(int t, int j) const {
    if (j > t || t >= T) return false;
    if (sink_part) return j < sinks;
    return j >= sinks && (window < 0 || j > t - window);
  }
  // May some query of [q0, q0 + 15] see some key of [k0, k0 + 15]?
  __device__ __forceinline__ bool block16(int q0, int k0) const {
    if (k0 > q0 + 15 || q0 >= T || k0 >= T) return false;
    if (sink_part) return k0 < sinks;
    return k0 + 15 >= sinks && (window < 0 || q0 < k0 + 15 + window);
  }
};

struct BackwardArgs {
  float *dq, *dk, *dv;
  float *part_k, *part_v;  // sink partials (chunks, 64, G, D) or null: write dk, dv directly
  const bf16 *q, *k, *v, *dob;
  const float *lse, *dsum;
  int T, H, G, sinks, window, chunk;
};

template <int D>
struct BwdSmem {
  static constexpr int LD = D + 8;
  static constexpr size_t tile = (size_t)kTile * LD * 2;
  static constexpr size_t total = 6 * tile + 4 * kTile * 4;  // 2 fixed + 2×2 streamed, lse, dsum
};

// dK, dV step of one warp (keys kw0 .. kw0 + 15) over NQ consecutive 16-query sub-blocks from
// qq0 of the query tile in Qb / Ob (lse · log2 e in Lb, dsum in Db): Sᵀ = K Qᵀ, dPᵀ = V dOᵀ,
// Pᵀ, dSᵀ = Pᵀ ∘ (dPᵀ − dsum), dV += Pᵀ dO, dK += dSᵀ Q. Unrolled, no branches.
template <int D, int NQ>
__device__ __forceinline__ void dkdv_step(const bf16* Ks, const bf16* Vs, const bf16* Qb,
                                          const bf16* Ob, const float* Lb, const float* Db,
                                          int qq0, int t0, int kw0, int warp,
                                          const BackwardMask& mask, float scale,
                                          float (&dk)[D / 8][4], float (&dv)[D / 8][4],
                                          int lane) {
  constexpr int LD = D + 8, KS = D / 16;
  const int gr = lane >> 2, gc = (lane & 3) * 2;
  float st[2 * NQ][4], dp[2 * NQ][4];
#pragma unroll
  for (int n = 0; n < 2 * NQ; ++n)
#pragma unroll
    for (int x = 0; x < 4; ++x) st[n][x] = dp[n][x] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    unsigned ka[4], va[4];
    ldsm_x4(ka, frag_a<LD>(Ks, warp * 16, ks * 16, lane));
    ldsm_x4(va, frag_a<LD>(Vs, warp * 16, ks * 16, lane));
#pragma unroll
    for (int qq = 0; qq < NQ; ++qq) {
      unsigned bq[4], bo[4];
      ldsm_x4(bq, frag_b<LD>(Qb, (qq0 + qq) * 16, ks * 16, lane));
      mma16816(st[2 * qq], ka, bq[0], bq[1]);
      mma16816(st[2 * qq + 1], ka, bq[2], bq[3]);
      ldsm_x4(bo, frag_b<LD>(Ob, (qq0 + qq) * 16, ks * 16, lane));
      mma16816(dp[2 * qq], va, bo[0], bo[1]);
      mma16816(dp[2 * qq + 1], va, bo[2], bo[3]);
    }
  }
  // Element x of tile n: key kw0 + gr + 8(x/2), query t0 + tl, tl = 16 qq0 + 8n + gc + x%2.
#pragma unroll
  for (int n = 0; n < 2 * NQ; ++n)
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const int j = kw0 + gr + (x >> 1) * 8, tl = qq0 * 16 + n * 8 + gc + (x & 1);
      const float p = mask.allows(t0 + tl, j) ? exp2f(st[n][x] * scale - Lb[tl]) : 0.0f;
      st[n][x] = p;
      dp[n][x] = p * (dp[n][x] - Db[tl]);
    }
#pragma unroll
  for (int qq = 0; qq < NQ; ++qq) {
    const unsigned pa[4] = {pack_bf16(st[2 * qq][0], st[2 * qq][1]),
                            pack_bf16(st[2 * qq][2], st[2 * qq][3]),
                            pack_bf16(st[2 * qq + 1][0], st[2 * qq + 1][1]),
                            pack_bf16(st[2 * qq + 1][2], st[2 * qq + 1][3])};
    const unsigned sa[4] = {pack_bf16(dp[2 * qq][0], dp[2 * qq][1]),
                            pack_bf16(dp[2 * qq][2], dp[2 * qq][3]),
                            pack_bf16(dp[2 * qq + 1][0], dp[2 * qq + 1][1]),
                            pack_bf16(dp[2 * qq + 1][2], dp[2 * qq + 1][3])};
#pragma unroll
    for (int dn = 0; dn < D / 16; ++dn) {
      unsigned bo[4], bq[4];
      ldsm_x4_trans(bo, frag_a<LD>(Ob, (qq0 + qq) * 16, dn * 16, lane));
      mma16816(dv[2 * dn], pa, bo[0], bo[1]);
      mma16816(dv[2 * dn + 1], pa, bo[2], bo[3]);
      ldsm_x4_trans(bq, frag_a<LD>(Qb, (qq0 + qq) * 16, dn * 16, lane));
      mma16816(dk[2 * dn], sa, bq[0], bq[1]);
      mma16816(dk[2 * dn + 1], sa, bq[2], bq[3]);
    }
  }
}

// dQ step of one warp (queries r0 .. r0 + 15) over NK consecutive 16-key sub-blocks from kk0:
// S = Q Kᵀ, dP = dO Vᵀ, dS = P ∘ (dP − dsum), dQ += dS K. Unrolled, no branches.
template <int D, int NK>
__device__ __forceinline__ void dq_step(const bf16* Kb, const bf16* Vb, int kk0, int j0, int r0,
                                        const Mask& mask, float scale,
                                        const unsigned (&qf)[D / 16][4],
                                        const unsigned (&of)[D / 16][4], const float (&lse)[2],
                                        const float (&dsum)[2], float (&dq)[D / 8][4],
                                        int lane) {
  constexpr int LD = D + 8, KS = D / 16;
  const int gr = lane >> 2, gc = (lane & 3) * 2;
  float s[2 * NK][4], dp[2 * NK][4];
#pragma unroll
  for (int n = 0; n < 2 * NK; ++n)
#pragma unroll
    for (int x = 0; x < 4; ++x) s[n][x] = dp[n][x] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < KS; ++ks)
#pragma unroll
    for (int kk = 0; kk < NK; ++kk) {
      unsigned bk[4], bv[4];
      ldsm_x4(bk, frag_b<LD>(Kb, (kk0 + kk) * 16, ks * 16, lane));
      mma16816(s[2 * kk], qf[ks], bk[0], bk[1]);
      mma16816(s[2 * kk + 1], qf[ks], bk[2], bk[3]);
      ldsm_x4(bv, frag_b<LD>(Vb, (kk0 + kk) * 16, ks * 16, lane));
      mma16816(dp[2 * kk], of[ks], bv[0], bv[1]);
      mma16816(dp[2 * kk + 1], of[ks], bv[2], bv[3]);
    }
#pragma unroll
  for (int n = 0; n < 2 * NK; ++n)
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const int rr = x >> 1, t = r0 + gr + rr * 8, j = j0 + kk0 * 16 + n * 8 + gc + (x & 1);
      const float p = mask.allows(t, j) ? exp2f(s[n][x] * scale - lse[rr]) : 0.0f;
      dp[n][x] = p * (dp[n][x] - dsum[rr]);
    }
#pragma unroll
  for (int kk = 0; kk < NK; ++kk) {
    const unsigned sa[4] = {pack_bf16(dp[2 * kk][0], dp[2 * kk][1]),
                            pack_bf16(dp[2 * kk][2], dp[2 * kk][3]),
                            pack_bf16(dp[2 * kk + 1][0], dp[2 * kk + 1][1]),
                            pack_bf16(dp[2 * kk + 1][2], dp[2 * kk + 1][3])};
#pragma unroll
    for (int dn = 0; dn < D / 16; ++dn) {
      unsigned bk[4];
      ldsm_x4_trans(bk, frag_a<LD>(Kb, (kk0 + kk) * 16, dn * 16, lane));
      mma16816(dq[2 * dn], sa, bk[0], bk[1]);
      mma16816(dq[2 * dn + 1], sa, bk[2], bk[3]);
    }
  }
}

// dK, dV of one key block of 64 keys and kv head g, summed over the group's query heads.
// Window part: grid (G, ⌈T/64⌉, 1), block y = key block. Sink part: grid (G, sink blocks, chunks).
// 128 threads; warp w owns keys [16w, 16w + 16) of the block and walks 16-query sub-blocks.
template <int D>
__global__ void __launch_bounds__(kThreads, 2) backward_dkdv_kernel(BackwardArgs a,
                                                                    bool sink_part) {
  constexpr int LD = D + 8, NO = D / 8;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* Ks = reinterpret_cast<bf16*>(smem);
  bf16* Vs = Ks + kTile * LD;
  bf16* Qs = Vs + kTile * LD;       // [2][64][LD]
  bf16* Os = Qs + 2 * kTile * LD;   // [2][64][LD] (dO)
  float* Ls = reinterpret_cast<float*>(Os + 2 * kTile * LD);  // [2][64] lse · log2 e
  float* Ds = Ls + 2 * kTile;                                 // [2][64] dsum
  const int g = blockIdx.x, kb = blockIdx.y, group = a.H / a.G;
  const int j0 = kb * kTile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kw0 = j0 + warp * 16;
  const int gr = lane >> 2, gc = (lane & 3) * 2;
  const BackwardMask mask{a.T, a.sinks, a.window, sink_part};
  const float scale = kLog2e / sqrtf((float)D);
  const long ldq = (long)a.H * D, ldk = (long)a.G * D;

  int q_begin, q_end;  // queries [q_begin, q_end)
  if (sink_part) {
    q_begin = max(j0, (int)blockIdx.z * a.chunk);
    q_end = min(a.T, ((int)blockIdx.z + 1) * a.chunk);
  } else {
    q_begin = j0;
    q_end = a.window < 0 ? a.T : min(a.T, j0 + kTile - 1 + a.window);
    if (j0 + kTile - 1 < a.sinks) q_end = q_begin;  // only sink keys: the sink part's
  }
  const int qb0 = q_begin / kTile;
  const int n_qb = q_end > q_begin ? (q_end - 1) / kTile - qb0 + 1 : 0;
  const int n_it = n_qb * group;

  load_tile<D>(Ks, a.k + (long)g * D, j0, ldk, kTile, a.T - j0);
  load_tile<D>(Vs, a.v + (long)g * D, j0, ldk, kTile, a.T - j0);
  auto load_q = [&](int it) {
    const int h = g * group + it % group, t0 = (qb0 + it / group) * kTile, b = it & 1;
    load_tile<D>(Qs + b * kTile * LD, a.q + (long)h * D, t0, ldq, kTile, a.T - t0);
    load_tile<D>(Os + b * kTile * LD, a.dob + (long)h * D, t0, ldq, kTile, a.T - t0);
    if (threadIdx.x < kTile) {
      const int t = t0 + threadIdx.x;
      Ls[b * kTile + threadIdx.x] = t < a.T ? a.lse[(long)t * a.H + h] * kLog2e : 0.0f;
      Ds[b * kTile + threadIdx.x] = t < a.T ? a.dsum[(long)t * a.H + h] : 0.0f;
    }
  };
  if (n_it > 0) load_q(0);
  device::cp_async_commit();

  float dk[NO][4], dv[NO][4];
#pragma unroll
  for (int n = 0; n < NO; ++n)
#pragma unroll
    for (int x = 0; x < 4; ++x) dk[n][x] = dv[n][x] = 0.0f;

  for (int it = 0; it < n_it; ++it) {
    if (it + 1 < n_it) {
      load_q(it + 1);
      device::cp_async_commit();
      device::cp_async_wait<1>();
    } else {
      device::cp_async_wait<0>();
    }
    __syncthreads();
    const int b = it & 1, t0 = (qb0 + it / group) * kTile;
    const bf16* Qb = Qs + b * kTile * LD;
    const bf16* Ob = Os + b * kTile * LD;
    const float* Lb = Ls + b * kTile;
    const float* Db = Ds + b * kTile;
    // The warp's needed 16-query sub-blocks as an interval, in steps of up to 2.
    int lo = 4, hi = -1;
#pragma unroll
    for (int qq = 0; qq < 4; ++qq)
      if (mask.block16(t0 + qq * 16, kw0)) lo = min(lo, qq), hi = qq;
    for (int qq = lo; qq <= hi; qq += 2) {
      if (qq < hi)
        dkdv_step<D, 2>(Ks, Vs, Qb, Ob, Lb, Db, qq, t0, kw0, warp, mask, scale, dk, dv, lane);
      else
        dkdv_step<D, 1>(Ks, Vs, Qb, Ob, Lb, Db, qq, t0, kw0, warp, mask, scale, dk, dv, lane);
    }
    __syncthreads();  // this buffer is refilled two iterations on
  }
  device::cp_async_wait<0>();

  // Write: window part → dk, dv rows j ≥ sinks; sink part → rows j < sinks, to the partials of
  // chunk z (or directly when there are none).
  const float inv_sqrt = rsqrtf((float)D);
  float* out_k = a.dk;
  float* out_v = a.dv;
  long row_off = 0;
  if (sink_part && a.part_k) {
    out_k = a.part_k;
    out_v = a.part_v;
    row_off = (long)blockIdx.z * kTile - j0;  // partial rows: chunk z × 64 + (j − j0)
  }
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int j = kw0 + gr + rr * 8;
    if (j >= a.T) continue;
    if (sink_part ? j >= a.sinks : j < a.sinks) continue;
    const long base = ((j + row_off) * a.G + g) * (long)D + gc;
#pragma unroll
    for (int n = 0; n < NO; ++n) {
      *reinterpret_cast<float2*>(out_k + base + n * 8) =
          make_float2(dk[n][2 * rr] * inv_sqrt, dk[n][2 * rr + 1] * inv_sqrt);
      *reinterpret_cast<float2*>(out_v + base + n * 8) = make_float2(dv[n][2 * rr], dv[n][2 * rr + 1]);
    }
  }
}

// dk, dv rows j < sinks (≤ 64) = Σ over chunks of the partials, in chunk order.
__global__ void backward_sink_reduce_kernel(float* __restrict__ dk, float* __restrict__ dv,
                                            const float* __restrict__ part_k,
                                            const float* __restrict__ part_v, int chunks,
                                            long per_chunk /* 64·G·D */, long n /* sinks·G·D */) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    float sk = 0.0f, sv = 0.0f;
    for (int c = 0; c < chunks; ++c) sk += part_k[c * per_chunk + i], sv += part_v[c * per_chunk + i];
    dk[i] = sk;
    dv[i] = sv;
  }
}

// dQ of one block of 64 queries and head h: grid (H, ⌈T/64⌉) (longest rows first), 128 threads;
// warp w owns queries [16w, 16w + 16) and walks the key blocks of the forward, 16 keys at a time.
template <int D>
__global__ void __launch_bounds__(kThreads, 2) backward_dq_kernel(BackwardArgs a) {
  constexpr int LD = D + 8, KS = D / 16, NO = D / 8;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* Qs = reinterpret_cast<bf16*>(smem);
  bf16* Os = Qs + kTile * LD;
  bf16* Ks = Os + kTile * LD;      // [2][64][LD]
  bf16* Vs = Ks + 2 * kTile * LD;  // [2][64][LD]
  const int h = blockIdx.x, hk = h / (a.H / a.G);
  const int t0 = (gridDim.y - 1 - blockIdx.y) * kTile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r0 = t0 + warp * 16;
  const int gr = lane >> 2, gc = (lane & 3) * 2;
  const Mask mask{a.T, a.sinks, a.window};
  const float scale = kLog2e / sqrtf((float)D);
  const long ldq = (long)a.H * D, ldk = (long)a.G * D;

  const KeyBlocks kbs(t0, a.T, a.sinks, a.window);
  load_tile<D>(Qs, a.q + (long)h * D, t0, ldq, kTile, a.T - t0);
  load_tile<D>(Os, a.dob + (long)h * D, t0, ldq, kTile, a.T - t0);
  auto load_kv = [&](int i) {
    const int kb = kbs.block(i), j0 = kb * kTile, rows = kbs.rows(kb);
    load_tile<D>(Ks + (i & 1) * kTile * LD, a.k + (long)hk * D, j0, ldk, rows, a.T - j0);
    load_tile<D>(Vs + (i & 1) * kTile * LD, a.v + (long)hk * D, j0, ldk, rows, a.T - j0);
  };
  if (kbs.count > 0) load_kv(0);
  device::cp_async_commit();

  float lse[2], dsum[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int t = r0 + gr + rr * 8;
    lse[rr] = t < a.T ? a.lse[(long)t * a.H + h] * kLog2e : 0.0f;
    dsum[rr] = t < a.T ? a.dsum[(long)t * a.H + h] : 0.0f;
  }
  unsigned qf[KS][4], of[KS][4];
  float dq[NO][4];
#pragma unroll
  for (int n = 0; n < NO; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;

  for (int i = 0; i < kbs.count; ++i) {
    if (i + 1 < kbs.count) {
      load_kv(i + 1);
      device::cp_async_commit();
      device::cp_async_wait<1>();
    } else {
      device::cp_async_wait<0>();
    }
    __syncthreads();
    if (i == 0) {
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        ldsm_x4(qf[ks], frag_a<LD>(Qs, warp * 16, ks * 16, lane));
        ldsm_x4(of[ks], frag_a<LD>(Os, warp * 16, ks * 16, lane));
      }
    }
    const int j0 = kbs.block(i) * kTile;
    const bf16* Kb = Ks + (i & 1) * kTile * LD;
    const bf16* Vb = Vs + (i & 1) * kTile * LD;
    int lo;
    const int n = needed_span(mask, r0, j0, lo);
    for (int kk = lo; kk < lo + n; kk += 2) {
      if (kk + 1 < lo + n)
        dq_step<D, 2>(Kb, Vb, kk, j0, r0, mask, scale, qf, of, lse, dsum, dq, lane);
      else
        dq_step<D, 1>(Kb, Vb, kk, j0, r0, mask, scale, qf, of, lse, dsum, dq, lane);
    }
    __syncthreads();
  }
  device::cp_async_wait<0>();
  const float inv_sqrt = rsqrtf((float)D);
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int t = r0 + gr + rr * 8;
    if (t >= a.T) continue;
    float* row = a.dq + ((long)t * a.H + h) * D + gc;
#pragma unroll
    for (int n = 0; n < NO; ++n)
      *reinterpret_cast<float2*>(row + n * 8) =
          make_float2(dq[n][2 * rr] * inv_sqrt, dq[n][2 * rr + 1] * inv_sqrt);
  }
}

// ---- decode ---------------------------------------------------------------------------------

// Flash decoding over the kv heads on tensor cores: block (split, g, b) reads its keys [j0, j1)
// of kv head g of sequence b once for all R = H/G query heads of the group (GQA: each key and
// value row leaves HBM once per group). The R heads are the rows of a 16-row Q tile (rows R..15
// zero), so a stage of 16·kDecodeSub keys is the forward's step (forward_step: S = Q·Kᵀ and
// O += P·V by mma.sync, online softmax in registers). Each warp streams its own stages (warp w: stages w,
// w + 4, w + 8, … of the block's keys) through its own ring of kDecodeStages shared buffers
// filled by 16-byte cp.async, kDecodeStages − 1 stages in flight while one is used, synchronized
// by __syncwarp only; the four warps meet once, at the end, to fold their (m, l, o) into the
// block's partial. The split gives one wave of resident blocks (decode_split).
constexpr int kDecodeSub = 2;                 // 16-key mma sub-blocks per warp stage
constexpr int kDecodeKeys = 16 * kDecodeSub;  // keys per warp stage
constexpr int kDecodeStages = 3;              // ring buffers per warp
constexpr int kDecodeWarps = 4;
constexpr int kDecodeThreads = kDecodeWarps * 32;
constexpr int kDecodeMaxGroup = 8;            // query heads per kv head (used rows of the Q tile)
constexpr int kDecodeMinBlocks = 1;           // resident blocks per SM asked of the compiler

template <int D>
struct DecodeSmem {
  static constexpr int LD = D + 8;                                  // as the forward's tiles
  static constexpr size_t q = (size_t)16 * LD * 2;                  // the 16-row Q tile
  static constexpr size_t tile = (size_t)kDecodeKeys * LD * 2;      // one stage of K (or V)
  static constexpr size_t ring = 2 * kDecodeStages * tile;          // a warp's K and V buffers
  static constexpr size_t total = q + kDecodeWarps * ring;          // Q, then the rings
  // The end-of-block fold reuses the rings: m, l (warps × 8) and o (warps × 8 × D) in fp32.
  static_assert(kDecodeWarps * kDecodeMaxGroup * (D + 2) * 4 <= kDecodeWarps * ring);
};

struct DecodeArgs {
  float *part_m, *part_l, *part_o;  // (B, H, splits) and (B, H, splits, D)
  const bf16* q;                    // (B, H, D)
  const bf16* const* k_rows;        // (B) device pointers, or null: k0
  const bf16* const* v_rows;
  const bf16 *k0, *v0;
  const long* lengths;              // (B), or null: length0
  long length0;
  int H, G, splits, split_keys;
};

// Keys at or past the block's end are masked (their rows were zero-filled).
struct DecodeKeyMask {
  int j1;
  __device__ __forceinline__ bool allows(int, int j) const { return j < j1; }
};

template <int D>
__global__ void __launch_bounds__(kDecodeThreads, kDecodeMinBlocks) decode_split_kernel(DecodeArgs a) {
  using Smem = DecodeSmem<D>;
  constexpr int LD = Smem::LD, KS = D / 16, NO = D / 8, VPR = D / 8;
  constexpr int kTileElems = kDecodeKeys * LD;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* Qs = reinterpret_cast<bf16*>(smem);
  const int split = blockIdx.x, g = blockIdx.y, b = blockIdx.z;
  const int R = a.H / a.G, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int gr = lane >> 2, gc = (lane & 3) * 2;
  const long len = a.lengths ? a.lengths[b] : a.length0;
  const long j0 = (long)split * a.split_keys, j1 = min(len, j0 + a.split_keys);
  if (j0 >= j1) return;  // beyond this sequence: the combine reads only its own splits
  bf16* Kr = Qs + 16 * LD + (size_t)warp * 2 * kDecodeStages * kTileElems;  // this warp's ring
  bf16* Vr = Kr + kDecodeStages * kTileElems;
  const size_t row_stride = (size_t)a.G * D;
  const bf16* K = (a.k_rows ? a.k_rows[b] : a.k0) + (size_t)g * D;
  const bf16* V = (a.v_rows ? a.v_rows[b] : a.v0) + (size_t)g * D;

  // This warp's stages: w, w + 4, … of the block's ⌈(j1 − j0)/kDecodeKeys⌉.
  const int block_stages = (int)((j1 - j0 + kDecodeKeys - 1) / kDecodeKeys);
  const int n = block_stages > warp ? (block_stages - warp + kDecodeWarps - 1) / kDecodeWarps : 0;
  auto stage_key = [&](int i) { return j0 + (long)(i * kDecodeWarps + warp) * kDecodeKeys; };
  auto load = [&](int i) {
    const long jt = stage_key(i);
    bf16* ks = Kr + (i % kDecodeStages) * kTileElems;
    bf16* vs = Vr + (i % kDecodeStages) * kTileElems;
    static_assert(kDecodeKeys * VPR % 32 == 0);
#pragma unroll
    for (int u = 0; u < kDecodeKeys * VPR / 32; ++u) {
      const int c = u * 32 + lane, r = c / VPR, col = (c % VPR) * 8;
      const bool valid = jt + r < j1;
      const size_t off = (size_t)(valid ? jt + r : j0) * row_stride + col;
      device::cp_async16(ks + r * LD + col, K + off, valid);
      device::cp_async16(vs + r * LD + col, V + off, valid);
    }
  };
#pragma unroll
  for (int s = 0; s < kDecodeStages - 1; ++s) {
    if (s < n) load(s);
    device::cp_async_commit();  // empty groups keep the count uniform
  }
  // The Q tile: rows 0..R-1 the group's query heads, the rest zero.
  const bf16* qg = a.q + ((size_t)b * a.H + (size_t)g * R) * D;
  for (int i = threadIdx.x; i < 16 * D; i += kDecodeThreads) {
    const int r = i / D, d = i % D;
    Qs[r * LD + d] = r < R ? qg[r * D + d] : __float2bfloat16(0.0f);
  }
  __syncthreads();
  unsigned qf[KS][4];
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) ldsm_x4(qf[ks], frag_a<LD>(Qs, 0, ks * 16, lane));
  float o[NO][4];
#pragma unroll
  for (int x = 0; x < NO; ++x) o[x][0] = o[x][1] = o[x][2] = o[x][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const float scale = kLog2e / sqrtf((float)D);
  const DecodeKeyMask mask{(int)j1};

  for (int i = 0; i < n; ++i) {
    device::cp_async_wait<kDecodeStages - 2>();  // stage i has landed (this lane's copies)
    __syncwarp();  // every lane's copies visible; every lane done with stage i − 1's buffer
    if (i + kDecodeStages - 1 < n) load(i + kDecodeStages - 1);  // refills stage i − 1's buffer
    device::cp_async_commit();
    const long jt = stage_key(i);
    const int slot = i % kDecodeStages;
    forward_step<D, kDecodeSub>(Kr + slot * kTileElems, Vr + slot * kTileElems, 0, (int)jt, 0,
                                jt + kDecodeKeys <= j1, mask, scale, qf, o, m, l, lane);
  }
  device::cp_async_wait<0>();
  l[0] += __shfl_xor_sync(0xffffffffu, l[0], 1);
  l[0] += __shfl_xor_sync(0xffffffffu, l[0], 2);

  // Fold the warps (row gr of each C fragment is query head gr of the group; rows ≥ R unused).
  __syncthreads();  // every warp is past its ring: reuse it
  float* fm = reinterpret_cast<float*>(smem + Smem::q);  // [warps][8]
  float* fl = fm + kDecodeWarps * kDecodeMaxGroup;          // [warps][8]
  float* fo = fl + kDecodeWarps * kDecodeMaxGroup;          // [warps][8][D]
  if (gr < R) {
    const int row = warp * kDecodeMaxGroup + gr;
    if ((lane & 3) == 0) fm[row] = m[0], fl[row] = l[0];
#pragma unroll
    for (int x = 0; x < NO; ++x)
      *reinterpret_cast<float2*>(fo + (size_t)row * D + x * 8 + gc) = make_float2(o[x][0], o[x][1]);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < R * D; i += kDecodeThreads) {
    const int r = i / D, d = i % D;
    float M = -INFINITY;  // finite: warp 0 holds key j0
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) M = fmaxf(M, fm[w * kDecodeMaxGroup + r]);
    float L = 0.0f, O = 0.0f;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) {
      const int row = w * kDecodeMaxGroup + r;
      const float wt = exp2f(fm[row] - M);  // 0 for a warp without keys (m = −∞)
      L += fl[row] * wt;
      O += fo[(size_t)row * D + d] * wt;
    }
    const size_t part = ((size_t)b * a.H + (size_t)g * R + r) * a.splits + split;
    a.part_o[part * D + d] = O;
    if (d == 0) a.part_m[part] = M, a.part_l[part] = L;
  }
}

// grid (H, B), D threads, `splits` floats of dynamic shared memory: combines the splits of
// sequence b's head h that hold keys. Each split's m and l is read by one thread (the weights to
// shared memory), then each thread sums its dim over the splits as independent loads.
__global__ void decode_combine_kernel(bf16* __restrict__ y, const float* __restrict__ part_m,
                                      const float* __restrict__ part_l,
                                      const float* __restrict__ part_o, const long* lengths,
                                      long length0, int splits, int split_keys, int H, int D) {
  device::pdl_trigger();  // the o projection's GEMV may start (its blocks wait for this one)
  extern __shared__ float combine_w[];  // [splits]
  __shared__ float scratch[32];
  const int h = blockIdx.x, b = blockIdx.y, d = threadIdx.x;
  const long len = lengths ? lengths[b] : length0;
  const int used = (int)min((long)splits, (len + split_keys - 1) / split_keys);
  const size_t base = ((size_t)b * H + h) * splits;
  float M = -INFINITY;
  for (int s = d; s < used; s += blockDim.x) M = fmaxf(M, part_m[base + s]);
  M = device::block_max(M, scratch);
  float L = 0.0f;
  for (int s = d; s < used; s += blockDim.x) {
    const float w = exp2f(part_m[base + s] - M);
    combine_w[s] = w;
    L += part_l[base + s] * w;
  }
  L = device::block_sum(L, scratch);  // its barriers publish combine_w
  float o = 0.0f;
#pragma unroll 8
  for (int s = 0; s < used; ++s) o += part_o[(base + s) * D + d] * combine_w[s];
  y[((size_t)b * H + h) * D + d] = __float2bfloat16(o / L);
}

// Row b of k, v (B, G, D) into row positions[b] of its cache k_rows[b], v_rows[b] (·, G, D).
__global__ void kv_cache_append_kernel(bf16* const* k_rows, bf16* const* v_rows, const bf16* k,
                                       const bf16* v, const long* positions, int GD) {
  const int b = blockIdx.y;
  const size_t dst = (size_t)positions[b] * GD, src = (size_t)b * GD;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < GD; i += gridDim.x * blockDim.x) {
    k_rows[b][dst + i] = k[src + i];
    v_rows[b][dst + i] = v[src + i];
  }
}

// How many splits of how many keys. Each block streams its split's keys (a whole number of
// rounds, one stage per warp), so a step takes about ⌈B·G·splits / resident⌉ waves of 1/splits of
// a sequence each: the fewest splits within 5% of the ideal B·G / resident waves of a whole
// sequence, else the best found (at most `reach`). B = 1 at Llama-3.1-8B shapes on an H200
// (132 SMs × 2 blocks): 32 splits, 256 blocks of 4,096 keys at 128K; B = 100: 6 splits.
struct DecodeSplit {
  int splits, split_keys;
  int capacity;  // the most splits of any length ≤ max_length (the workspace's size)
};
struct WaveSplits {
  long splits;
  bool met;  // within 5% of the ideal
};
WaveSplits decode_wave_splits(long blocks, long resident, long reach) {
  long best = 1;
  double best_cost = INFINITY;
  for (long s = 1; s <= reach; ++s) {
    const long waves = (blocks * s + resident - 1) / resident;
    if (waves * resident * 100 <= 105 * blocks * s) return {s, true};
    const double cost = (double)waves / s;
    if (cost < best_cost) best = s, best_cost = cost;
  }
  return {best, false};
}
DecodeSplit decode_split(int B, int G, long max_length, int resident) {
  constexpr long kRound = (long)kDecodeWarps * kDecodeKeys;
  const long blocks = std::max(1L, (long)B * G), res = std::max(1, resident);
  const long rounds = std::max(1L, (max_length + kRound - 1) / kRound);
  const long reach = std::min(rounds, 2 * ((res + blocks - 1) / blocks) + 16);
  const WaveSplits w = decode_wave_splits(blocks, res, reach);
  const long split_keys = (rounds + w.splits - 1) / w.splits * kRound;
  // A shorter length takes the same splits once its reach passes them, else at most its reach.
  return {(int)((max_length + split_keys - 1) / split_keys), (int)split_keys,
          (int)(w.met ? w.splits : reach)};
}

// decode_split_kernel<D> with its shared memory allowed; how many of its blocks the device holds
// at once (computed once per head dim; 0 where the device refuses the kernel).
template <int D>
int decode_prepare(cudaError_t* err) {
  auto kernel = decode_split_kernel<D>;
  *err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              (int)DecodeSmem<D>::total);
  static const int resident = [&] {
    int device = 0, sms = 0, per_sm = 0;
    if (*err != cudaSuccess || cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kDecodeThreads,
                                                      DecodeSmem<D>::total) != cudaSuccess)
      return 0;
    return sms * per_sm;
  }();
  return resident;
}

int decode_resident_blocks(int D, cudaError_t* err) {
  *err = cudaSuccess;
  if (D == 64) return decode_prepare<64>(err);
  if (D == 128) return decode_prepare<128>(err);
  return 1;  // refused by dispatch_head_dim at launch
}

// Queries per block of the sink keys' dk/dv (a multiple of 64): about kSinkChunks chunks per kv
// head, so that G · chunks blocks fill the GPU (a fixed 512 gave 64 blocks at T = 4096, G = 8:
// 118 µs, the slowest kernel of the sink + window backward; session 14).
constexpr int kSinkChunks = 32;
inline int sink_chunk(int T) {
  const int per = (T + kSinkChunks - 1) / kSinkChunks;
  return std::max(64, (per + 63) / 64 * 64);
}

using device::align_up;

template <int D, bool kMix>
Status launch_forward(const ForwardArgs& args, cudaStream_t stream) {
  auto kernel = flash_forward_kernel<D, kMix>;
  GL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)FwdSmem<D>::total));
  kernel<<<dim3(args.H, (args.T + kTile - 1) / kTile), kThreads, FwdSmem<D>::total, stream>>>(args);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

}  // namespace

Status attention_forward(bf16* y, float* lse, const bf16* q, const bf16* k, const bf16* v, int T,
                         int H, int G, int D, AttentionMaskSpec mask, cudaStream_t stream) {
  if (T <= 0 || H <= 0 || G <= 0 || H % G != 0)
    return make_error("attention_forward: bad shape T=", T, " H=", H, " G=", G);
  if (detail::attention_wgmma_applies(D, mask))
    return detail::attention_forward_wgmma(y, lse, q, k, v, T, H, G, D, stream);
  const ForwardArgs args{y, lse, q, k, v, T, H, G, std::max(0, mask.sinks), mask.window, nullptr, 0, {}};
  return dispatch_head_dim(D, [&](auto d) -> Status {
    return launch_forward<decltype(d)::value, false>(args, stream);
  });
}

Status attention_forward_mixed(bf16* y, const float* lambda, int lin_from, const bf16* q,
                               const bf16* k, const bf16* v, int T, int H, int G, int D,
                               AttentionMaskSpec mask, cudaStream_t stream,
                               const AttentionMixGate& gate) {
  if (T <= 0 || H <= 0 || G <= 0 || H % G != 0)
    return make_error("attention_forward_mixed: bad shape T=", T, " H=", H, " G=", G);
  if (gate.c_lse && (!gate.lse || (gate.far_start >= 0 && !gate.a_far)))
    return make_error("attention_forward_mixed: an lse gate needs the lse buffer (and a_far)");
  const ForwardArgs args{y, gate.c_lse ? gate.lse : nullptr, q, k, v, T, H, G,
                         std::max(0, mask.sinks), mask.window, lambda, lin_from, gate};
  return dispatch_head_dim(D, [&](auto d) -> Status {
    return launch_forward<decltype(d)::value, true>(args, stream);
  });
}

size_t attention_backward_workspace_bytes(int T, int H, int G, int D) {
  const size_t rows = (size_t)T * H;
  const size_t chunks = ((size_t)T + sink_chunk(T) - 1) / sink_chunk(T);
  return align_up(rows * D * 2) + align_up(rows * 4) +
         2 * align_up(chunks * kTile * (size_t)G * D * 4);
}

Status attention_backward(float* dq, float* dk, float* dv, const float* dy, const bf16* y,
                          const float* lse, const bf16* q, const bf16* k, const bf16* v, int T,
                          int H, int G, int D, AttentionMaskSpec mask, void* workspace,
                          size_t workspace_bytes, cudaStream_t stream, const float* dlse) {
  if (T <= 0 || H <= 0 || G <= 0 || H % G != 0)
    return make_error("attention_backward: bad shape T=", T, " H=", H, " G=", G);
  if (workspace_bytes < attention_backward_workspace_bytes(T, H, G, D))
    return make_error("attention_backward: workspace too small (", workspace_bytes, " < ",
                      attention_backward_workspace_bytes(T, H, G, D), ")");
  const int window = mask.window;
  const int sinks = window < 0 ? 0 : std::min(std::max(0, mask.sinks), T);
  const size_t rows = (size_t)T * H;
  char* w = static_cast<char*>(workspace);
  bf16* dob = reinterpret_cast<bf16*>(w);
  w += align_up(rows * D * 2);
  float* dsum = reinterpret_cast<float*>(w);
  w += align_up(rows * 4);
  const size_t chunks_cap = ((size_t)T + sink_chunk(T) - 1) / sink_chunk(T);
  float* part_k = reinterpret_cast<float*>(w);
  float* part_v = reinterpret_cast<float*>(w + align_up(chunks_cap * kTile * (size_t)G * D * 4));

  return dispatch_head_dim(D, [&](auto d) -> Status {
    constexpr int Dc = decltype(d)::value;
    const int nqt = (T + kTile - 1) / kTile;
    backward_prepare_kernel<Dc><<<(unsigned)((rows * 32 + 255) / 256), 256, 0, stream>>>(
        dsum, dob, dy, y, dlse, (long)rows);
    GL_CUDA_CHECK_LAUNCH();
    if (detail::attention_wgmma_applies(Dc, mask))  // full causal: on wgmma
      return detail::attention_backward_wgmma(dq, dk, dv, q, k, v, dob, lse, dsum, T, H, G, Dc, stream);
    BackwardArgs args{dq, dk, dv, nullptr, nullptr, q, k, v, dob, lse, dsum,
                      T, H, G, sinks, window, T};
    const size_t bytes = BwdSmem<Dc>::total;
    GL_CUDA_CHECK(cudaFuncSetAttribute(backward_dq_kernel<Dc>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    GL_CUDA_CHECK(cudaFuncSetAttribute(backward_dkdv_kernel<Dc>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    backward_dq_kernel<Dc><<<dim3(H, nqt), kThreads, bytes, stream>>>(args);
    GL_CUDA_CHECK_LAUNCH();
    backward_dkdv_kernel<Dc><<<dim3(G, nqt, 1), kThreads, bytes, stream>>>(args, false);
    GL_CUDA_CHECK_LAUNCH();
    if (sinks > 0) {
      const int nsb = (sinks + kTile - 1) / kTile;
      const int chunks = (T + sink_chunk(T) - 1) / sink_chunk(T);
      if (nsb == 1 && chunks > 1) {
        args.part_k = part_k;
        args.part_v = part_v;
        args.chunk = sink_chunk(T);
        backward_dkdv_kernel<Dc><<<dim3(G, 1, chunks), kThreads, bytes, stream>>>(args, true);
        GL_CUDA_CHECK_LAUNCH();
        const long n = (long)sinks * G * Dc;
        backward_sink_reduce_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(
            dk, dv, part_k, part_v, chunks, (long)kTile * G * Dc, n);
        GL_CUDA_CHECK_LAUNCH();
      } else {  // one chunk of all queries per sink block: written directly
        args.chunk = T;
        backward_dkdv_kernel<Dc><<<dim3(G, nsb, 1), kThreads, bytes, stream>>>(args, true);
        GL_CUDA_CHECK_LAUNCH();
      }
    }
    return ok_status();
  });
}

size_t attention_decode_workspace_bytes(int B, int H, int G, int D, long max_length) {
  cudaError_t err;
  const DecodeSplit sp = decode_split(B, G, max_length, decode_resident_blocks(D, &err));
  return (size_t)B * H * sp.capacity * (2 + D) * sizeof(float);
}

AttentionDecodeSplit attention_decode_split(int B, int G, int D, long max_length) {
  cudaError_t err;
  const DecodeSplit sp = decode_split(B, G, max_length, decode_resident_blocks(D, &err));
  return {sp.splits, sp.split_keys};
}

namespace {

Status launch_decode(bf16* y, DecodeArgs args, int B, long max_length, int D, void* workspace,
                     size_t workspace_bytes, cudaStream_t stream) {
  const int H = args.H, G = args.G;
  if (B <= 0 || max_length <= 0 || G <= 0 || H % G != 0 || H / G > kDecodeMaxGroup)
    return make_error("attention_decode: bad batch, context or heads (B=", B, " H=", H, " G=", G,
                      "; at most ", kDecodeMaxGroup, " query heads per kv head)");
  if (workspace_bytes < attention_decode_workspace_bytes(B, H, G, D, max_length))
    return make_error("attention_decode: workspace too small for ", B, " sequences of ",
                      max_length, " keys");
  cudaError_t err;
  const DecodeSplit sp = decode_split(B, G, max_length, decode_resident_blocks(D, &err));
  GL_CUDA_CHECK(err);
  args.splits = sp.splits;
  args.split_keys = sp.split_keys;
  args.part_m = static_cast<float*>(workspace);
  args.part_l = args.part_m + (size_t)B * H * sp.splits;
  args.part_o = args.part_l + (size_t)B * H * sp.splits;
  return dispatch_head_dim(D, [&](auto d) -> Status {
    constexpr int Dc = decltype(d)::value;
    decode_split_kernel<Dc><<<dim3(sp.splits, G, B), kDecodeThreads, DecodeSmem<Dc>::total,
                              stream>>>(args);
    GL_CUDA_CHECK_LAUNCH();
    decode_combine_kernel<<<dim3(H, B), Dc, sp.splits * sizeof(float), stream>>>(
        y, args.part_m, args.part_l, args.part_o, args.lengths, args.length0, sp.splits,
        sp.split_keys, H, Dc);
    GL_CUDA_CHECK_LAUNCH();
    return ok_status();
  });
}

}  // namespace

Status attention_decode(bf16* y, const bf16* q, const bf16* k, const bf16* v, long context, int H,
                        int G, int D, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream) {
  DecodeArgs args{};
  args.q = q;
  args.k0 = k;
  args.v0 = v;
  args.length0 = context;
  args.H = H;
  args.G = G;
  return launch_decode(y, args, 1, context, D, workspace, workspace_bytes, stream);
}

Status attention_decode_batch(bf16* y, const bf16* q, const bf16* const* k_rows,
                              const bf16* const* v_rows, const long* lengths, int B,
                              long max_length, int H, int G, int D, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  DecodeArgs args{};
  args.q = q;
  args.k_rows = k_rows;
  args.v_rows = v_rows;
  args.lengths = lengths;
  args.H = H;
  args.G = G;
  return launch_decode(y, args, B, max_length, D, workspace, workspace_bytes, stream);
}

Status kv_cache_append(bf16* const* k_rows, bf16* const* v_rows, const bf16* k, const bf16* v,
                       const long* positions, int B, int G, int D, cudaStream_t stream) {
  if (B <= 0) return make_error("kv_cache_append: no sequences");
  const int GD = G * D;
  kv_cache_append_kernel<<<dim3((GD + 255) / 256, B), 256, 0, stream>>>(k_rows, v_rows, k, v,
                                                                        positions, GD);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

}  // namespace golinear::kernels::cuda
