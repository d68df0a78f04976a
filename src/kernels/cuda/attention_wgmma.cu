// Full causal attention, forward and backward, on Hopper's warpgroup MMA (see attention_wgmma.h;
// the backward's two kernels are described at their section).
//
// Forward: one block = 128 queries of one head, three warpgroups:
//   warpgroup 0, the producer: one thread loads Q once and K, V tiles of 128 keys through the
//     bulk tensor copy engine (TMA, 128-byte swizzle) into a two-stage ring, each stage's arrival
//     on an mbarrier (full), its reuse gated by another (empty); its registers are given away
//     (setmaxnreg) to
//   warpgroups 1 and 2, the consumers, 64 query rows each: S = Q Kᵀ (wgmma m64n128k16, both
//     operands from shared memory), online softmax in registers, O += P V (wgmma with P from
//     registers — the accumulator layout of S is the A-fragment layout of P — and V read
//     MN-major from the same swizzled tile). Within a warpgroup, S(n) = Q K(n)ᵀ and O += P(n−1)
//     V(n−1) are issued together and the softmax of S(n) runs while the second is in flight
//     (FlashAttention-3's intra-warpgroup overlap); the two warpgroups issue their products in
//     turns (pingpong, named barriers 1 and 2), so one's softmax runs beside the other's products.
// Shared memory (D = 128): Q 32 KiB + 2 × (K 32 KiB + V 32 KiB) = 160 KiB, one block per SM.
// Each 128-row tile is stored as D/64 swizzle atoms of 128 rows × 128 bytes (64 bf16), the
// layout TMA's 128-byte swizzle writes and wgmma's K-major (Q, K) and MN-major (V) descriptors
// read.
#include "kernels/cuda/attention_wgmma.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <cmath>
#include <mutex>
#include <type_traits>

#include "kernels/cuda/device_utils.cuh"

namespace golinear::kernels::cuda::detail {

namespace {

constexpr int kRows = 128;     // queries per block, keys per tile
constexpr int kStages = 2;  // K/V ring depth (3: no faster, docs/BENCHMARKS.md session 9)
constexpr int kThreads = 384;  // producer + 2 consumer warpgroups
constexpr int kAtomBytes = kRows * 128;  // one 64-column swizzle atom of a 128-row tile
using device::fast_exp2;
using device::kLog2e;
using device::pack_bf16;

template <int D>
struct Smem {
  static constexpr int tile = (D / 64) * kAtomBytes;  // one 128 × D bf16 tile
  static constexpr int q = 0;
  static constexpr int k = q + tile;
  static constexpr int v = k + kStages * tile;
  static constexpr int bars = v + kStages * tile;  // q_full, k_full[S], k_empty[S], v_full[S], v_empty[S]
  static constexpr int total = bars + 8 * (1 + 4 * kStages);
  static constexpr int request = total + 1024;  // room to align the base to 1024 bytes
};

// ---- mbarrier, TMA, wgmma ------------------------------------------------------------------

__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
// A box of a (D, heads, T) bf16 tensor (tensor_map: 64 or 128 rows × 64 columns of one head) from
// (col, head, row), 128-byte swizzled, completing on `bar`.
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap* map, int col, int head,
                                         int row, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3, %4}], [%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(col), "r"(head), "r"(row), "r"(bar)
      : "memory");
}

// Shared-memory matrix descriptor, 128-byte swizzle: lbo, sbo as wgmma reads them (K-major: sbo
// = 1024, the 8-row groups; MN-major: lbo between 64-column atoms, sbo between 8-row groups).
__device__ __forceinline__ uint64_t desc_sw128(uint32_t saddr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((saddr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) |
         ((uint64_t)(sbo >> 4) << 32) | (1ull << 62);
}
// The descriptor of the same layout `bytes` further on: its address field counts 16-byte units
// and shared addresses stay below 2^18 (no carry out of it). One add where a new descriptor
// costs a shift, a mask and a move to the uniform registers per wgmma.
__device__ __forceinline__ uint64_t desc_advance(uint64_t d, uint32_t bytes) { return d + (bytes >> 4); }
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

#define GL_WG_ACC8(d, o)                                                                    \
  "+f"(d[o][0]), "+f"(d[o][1]), "+f"(d[o][2]), "+f"(d[o][3]), "+f"(d[o + 1][0]),            \
      "+f"(d[o + 1][1]), "+f"(d[o + 1][2]), "+f"(d[o + 1][3]), "+f"(d[o + 2][0]),           \
      "+f"(d[o + 2][1]), "+f"(d[o + 2][2]), "+f"(d[o + 2][3]), "+f"(d[o + 3][0]),           \
      "+f"(d[o + 3][1]), "+f"(d[o + 3][2]), "+f"(d[o + 3][3]), "+f"(d[o + 4][0]),           \
      "+f"(d[o + 4][1]), "+f"(d[o + 4][2]), "+f"(d[o + 4][3]), "+f"(d[o + 5][0]),           \
      "+f"(d[o + 5][1]), "+f"(d[o + 5][2]), "+f"(d[o + 5][3]), "+f"(d[o + 6][0]),           \
      "+f"(d[o + 6][1]), "+f"(d[o + 6][2]), "+f"(d[o + 6][3]), "+f"(d[o + 7][0]),           \
      "+f"(d[o + 7][1]), "+f"(d[o + 7][2]), "+f"(d[o + 7][3])
#define GL_WG_R32                                                                             \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define GL_WG_R64                                                                             \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "  \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "  \
  "%56, %57, %58, %59, %60, %61, %62, %63}"

// d (64 × 128) (+)= A (64 × 16, descriptor) · B (16 × 128, descriptor, K-major); scale_d = 0
// overwrites d. The accumulator of warp w of the warpgroup is the mma.sync m16n8 C fragment of
// rows 16w.. per 8 columns.
__device__ __forceinline__ void wg_ss_n128(float (&d)[16][4], uint64_t da, uint64_t db,
                                           int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " GL_WG_R64
               ", %64, %65, p, 1, 1, 0, 0;\n}\n"
               : GL_WG_ACC8(d, 0), GL_WG_ACC8(d, 8)
               : "l"(da), "l"(db), "r"(scale_d));
}
// d (64 × N) += a (64 × 16, registers: the mma.sync A fragment of the warp's 16 rows) · B
// (16 × N, descriptor, MN-major).
__device__ __forceinline__ void wg_rs_n128_t(float (&d)[16][4], const uint32_t (&a)[4], uint64_t db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " GL_WG_R64
               ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
               : GL_WG_ACC8(d, 0), GL_WG_ACC8(d, 8)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}
__device__ __forceinline__ void wg_rs_n64_t(float (&d)[8][4], const uint32_t (&a)[4], uint64_t db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " GL_WG_R32
               ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
               : GL_WG_ACC8(d, 0)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

// d (64 × D) += a (registers) · B (16 × D, descriptor, MN-major).
template <int D>
__device__ __forceinline__ void wg_rs_t(float (&d)[D / 8][4], const uint32_t (&a)[4], uint64_t db) {
  if constexpr (D == 128)
    wg_rs_n128_t(d, a, db);
  else
    wg_rs_n64_t(d, a, db);
}
// The A fragments (K of 16 columns each) of a 64 × 16K accumulator tile, as bf16: the C fragment
// of columns 16k.. and 16k + 8.. is the A fragment of the k-th 16 columns.
template <int K>
__device__ __forceinline__ void pack_frags(uint32_t (&f)[K][4], const float (&x)[2 * K][4]) {
#pragma unroll
  for (int kk = 0; kk < K; ++kk) {
    f[kk][0] = pack_bf16(x[2 * kk][0], x[2 * kk][1]);
    f[kk][1] = pack_bf16(x[2 * kk][2], x[2 * kk][3]);
    f[kk][2] = pack_bf16(x[2 * kk + 1][0], x[2 * kk + 1][1]);
    f[kk][3] = pack_bf16(x[2 * kk + 1][2], x[2 * kk + 1][3]);
  }
}

// The dynamic shared memory's base rounded up to 1024 bytes (the swizzle atoms' alignment).
__device__ __forceinline__ uint32_t aligned_base(const unsigned char* raw) {
  return (static_cast<uint32_t>(__cvta_generic_to_shared(raw)) + 1023u) & ~1023u;
}

struct Args {
  bf16* y;
  float* lse;
  int T, H, G;
};

// S = Q K(stage)ᵀ for this warpgroup's 64 rows, issued (not waited for).
template <int D>
__device__ __forceinline__ void issue_scores(float (&s)[16][4], uint32_t q_base, uint32_t k_base) {
  const uint64_t dq = desc_sw128(q_base, 16, 1024), dk = desc_sw128(k_base, 16, 1024);
  wg_fence();
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const uint32_t off = (ks / 4) * kAtomBytes + (ks % 4) * 32;
    wg_ss_n128(s, desc_advance(dq, off), desc_advance(dk, off), ks > 0);
  }
  wg_commit();
}

// O += P V(stage): P as 8 A fragments of 16 keys, V MN-major (16 keys × D per step).
template <int D>
__device__ __forceinline__ void issue_pv(float (&o)[D / 8][4], const uint32_t (&p)[8][4],
                                         uint32_t v_base) {
  const uint64_t dv = desc_sw128(v_base, kAtomBytes, 1024);
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) wg_rs_t<D>(o, p[kk], desc_advance(dv, kk * 16 * 128));
  wg_commit();
}

// Online softmax of one 64 × 128 score tile (rows gr, gr + 8 of the warp's 16: x = 0, 1 and
// 2, 3 of each C fragment): masks keys past the row (causal) when kDiag, updates m (in log2
// units: max of s·scale), l, returns the rescale factor of each row in corr and leaves
// p = exp2(s·scale − m) in s (one FFMA and one exp2 per score).
template <bool kDiag>
__device__ __forceinline__ void softmax_tile(float (&s)[16][4], float (&m)[2], float (&l)[2],
                                             float (&corr)[2], int row0, int j0, int lane,
                                             float scale) {
  const int gr = lane >> 2, gc = (lane & 3) * 2;
  if constexpr (kDiag) {
#pragma unroll
    for (int n = 0; n < 16; ++n)
#pragma unroll
      for (int x = 0; x < 4; ++x)
        if (j0 + n * 8 + gc + (x & 1) > row0 + gr + (x >> 1) * 8) s[n][x] = -INFINITY;
  }
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float mx = -INFINITY;
#pragma unroll
    for (int n = 0; n < 16; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * rr], s[n][2 * rr + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m[rr], mx * scale);
    const float m_use = m_new == -INFINITY ? 0.0f : m_new;
    corr[rr] = fast_exp2(m[rr] - m_use);
    float sum = 0.0f;
#pragma unroll
    for (int n = 0; n < 16; ++n) {
      s[n][2 * rr] = fast_exp2(fmaf(s[n][2 * rr], scale, -m_use));
      s[n][2 * rr + 1] = fast_exp2(fmaf(s[n][2 * rr + 1], scale, -m_use));
      sum += s[n][2 * rr] + s[n][2 * rr + 1];
    }
    l[rr] = l[rr] * corr[rr] + sum;
    m[rr] = m_new;
  }
}

// grid: ⌈T/128⌉ · H blocks, the longest query blocks first, the heads of a kv group adjacent.
template <int D>
__global__ void __launch_bounds__(kThreads, 1)
    flash_forward_wgmma_kernel(const __grid_constant__ CUtensorMap tq,
                               const __grid_constant__ CUtensorMap tk,
                               const __grid_constant__ CUtensorMap tv, Args a) {
  using L = Smem<D>;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = aligned_base(smem_raw);
  const uint32_t q_full = base + L::bars;
  auto k_full = [&](int s) { return q_full + 8 * (1 + s); };
  auto k_empty = [&](int s) { return q_full + 8 * (1 + kStages + s); };
  auto v_full = [&](int s) { return q_full + 8 * (1 + 2 * kStages + s); };
  auto v_empty = [&](int s) { return q_full + 8 * (1 + 3 * kStages + s); };

  const int nq = (a.T + kRows - 1) / kRows;
  const int qb = nq - 1 - (int)blockIdx.x / a.H, h = (int)blockIdx.x % a.H;
  const int hk = h / (a.H / a.G), t0 = qb * kRows;
  const int n_blocks = qb + 1;  // key tiles 0..qb (causal)
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);  // warp-uniform to the compiler

  if (threadIdx.x == 0) {
    mbar_init(q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(k_full(s), 1), mbar_init(v_full(s), 1);
      mbar_init(k_empty(s), 8), mbar_init(v_empty(s), 8);  // the 8 consumer warps
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {  // producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
    if (threadIdx.x == 0) {
      constexpr uint32_t tile = L::tile;
      mbar_expect_tx(q_full, tile);
      for (int c = 0; c < D / 64; ++c) tma_load(base + L::q + c * kAtomBytes, &tq, c * 64, h, t0, q_full);
      for (int i = 0; i < n_blocks; ++i) {
        const int s = i % kStages;
        const uint32_t ph = (i / kStages) & 1;
        mbar_wait(k_empty(s), ph ^ 1);
        mbar_expect_tx(k_full(s), tile);
        for (int c = 0; c < D / 64; ++c)
          tma_load(base + L::k + s * tile + c * kAtomBytes, &tk, c * 64, hk, i * kRows, k_full(s));
        mbar_wait(v_empty(s), ph ^ 1);
        mbar_expect_tx(v_full(s), tile);
        for (int c = 0; c < D / 64; ++c)
          tma_load(base + L::v + s * tile + c * kAtomBytes, &tv, c * 64, hk, i * kRows, v_full(s));
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");

  // consumers
  const int cw = wg - 1, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int row0 = t0 + 64 * cw + 16 * warp;  // this warp's first query
  const uint32_t q_base = base + L::q + cw * 64 * 128;
  const float scale = kLog2e / sqrtf((float)D);
  constexpr int NO = D / 8;
  float o[NO][4];
#pragma unroll
  for (int n = 0; n < NO; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, corr[2];
  float s[16][4];
  uint32_t p[8][4];
  // Tile n is diagonal (needs the causal mask) when some key of it lies past some row of this
  // warpgroup: only the last one.
  const int wg_row0 = t0 + 64 * cw;
  auto diagonal = [&](int i) { return i * kRows + kRows - 1 > wg_row0; };
  // Pingpong: warpgroup cw issues its products after named barrier 1 + cw, then lets the other
  // one issue (barrier 2 − cw), so that one softmax runs beside the other's products. Warpgroup 1
  // opens the first turn and skips its last pass (every barrier sees as many passes as waits).
  auto turn_wait = [&]() {
    asm volatile("bar.sync %0, 256;\n" ::"r"(1 + cw) : "memory");
  };
  auto turn_pass = [&](bool last) {
    if (!(last && cw == 1)) asm volatile("bar.arrive %0, 256;\n" ::"r"(2 - cw) : "memory");
  };
  if (cw == 1) asm volatile("bar.arrive 1, 256;\n" ::: "memory");

  mbar_wait(q_full, 0);
  mbar_wait(k_full(0), 0);
  turn_wait();
  issue_scores<D>(s, q_base, base + L::k);
  turn_pass(false);
  wg_wait<0>();
  __syncwarp();
  if (lane == 0) mbar_arrive(k_empty(0));
  if (diagonal(0))
    softmax_tile<true>(s, m, l, corr, row0, 0, lane, scale);
  else
    softmax_tile<false>(s, m, l, corr, row0, 0, lane, scale);
  pack_frags(p, s);

  for (int i = 1; i < n_blocks; ++i) {
    const int s_cur = i % kStages, s_prev = (i - 1) % kStages;
    const uint32_t ph = (i / kStages) & 1, ph_prev = ((i - 1) / kStages) & 1;
    mbar_wait(k_full(s_cur), ph);
    mbar_wait(v_full(s_prev), ph_prev);
    turn_wait();
    issue_scores<D>(s, q_base, base + L::k + s_cur * L::tile);
    issue_pv<D>(o, p, base + L::v + s_prev * L::tile);
    turn_pass(false);
    wg_wait<1>();  // the scores
    __syncwarp();
    if (lane == 0) mbar_arrive(k_empty(s_cur));
    if (diagonal(i))
      softmax_tile<true>(s, m, l, corr, row0, i * kRows, lane, scale);
    else
      softmax_tile<false>(s, m, l, corr, row0, i * kRows, lane, scale);
    wg_wait<0>();  // P(i−1) V(i−1)
    __syncwarp();
    if (lane == 0) mbar_arrive(v_empty(s_prev));
#pragma unroll
    for (int n = 0; n < NO; ++n) {
      o[n][0] *= corr[0], o[n][1] *= corr[0];
      o[n][2] *= corr[1], o[n][3] *= corr[1];
    }
    pack_frags(p, s);
  }
  {
    const int s_last = (n_blocks - 1) % kStages;
    mbar_wait(v_full(s_last), ((n_blocks - 1) / kStages) & 1);
    turn_wait();
    wg_fence();
    issue_pv<D>(o, p, base + L::v + s_last * L::tile);
    turn_pass(true);
    wg_wait<0>();
  }

  // Epilogue: normalize, store the rows below T (bf16 pairs), the lse.
  const int gr = lane >> 2, gc = (lane & 3) * 2;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 1);
    l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 2);
    const int t = row0 + gr + rr * 8;
    if (t >= a.T) continue;
    const float inv = l[rr] > 0.0f ? 1.0f / l[rr] : 0.0f;
    bf16* dst = a.y + ((long)t * a.H + h) * D + gc;
#pragma unroll
    for (int n = 0; n < NO; ++n)
      *reinterpret_cast<__nv_bfloat162*>(dst + n * 8) =
          __floats2bfloat162_rn(o[n][2 * rr] * inv, o[n][2 * rr + 1] * inv);
    if (a.lse && (lane & 3) == 0)
      a.lse[(long)t * a.H + h] = l[rr] > 0.0f ? (m[rr] + log2f(l[rr])) / kLog2e : -INFINITY;
  }
}

// ---- backward ---------------------------------------------------------------------------------
//
// The same three-warpgroup layout for the two kernels of attention_backward (full causal):
//   dq: a block per 128 queries of one head (consumers: 64 each), K and V streamed in tiles of
//     64 keys: S = Q Kᵀ and dP = dO Vᵀ (wgmma from shared memory), P = exp2(S·c − lse), dS =
//     P ∘ (dP − dsum) in registers, dQ += dS K (dS from registers, K read MN-major). The products
//     of tile n are issued beside dQ's product of tile n − 1.
//   dk, dv: a block per 128 keys of one kv head (consumers: 64 keys each), the group's query
//     heads and their query tiles of 64 streamed (Q, dO by TMA; each tile's 64 values of lse·log2e and
//     dsum loaded by the warpgroup into a shared buffer while its products run): Sᵀ = K Qᵀ, dPᵀ = V dOᵀ, Pᵀ, dSᵀ, then dV += Pᵀ dO and dK += dSᵀ Q
//     (Q and dO read MN-major). The group's heads are summed inside the block: deterministic.

// d (64 × 64) (+)= A (64 × 16, descriptor) · B (16 × 64, descriptor, K-major).
__device__ __forceinline__ void wg_ss_n64(float (&d)[8][4], uint64_t da, uint64_t db, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " GL_WG_R32
               ", %32, %33, p, 1, 1, 0, 0;\n}\n"
               : GL_WG_ACC8(d, 0)
               : "l"(da), "l"(db), "r"(scale_d));
}
// acc (64 × 64) = A (64 rows at a, atoms of a_atom bytes) · B (64 rows at b, atoms of b_atom)ᵀ
// over D, issued (not committed).
template <int D>
__device__ __forceinline__ void issue_ss64(float (&acc)[8][4], uint32_t a, uint32_t a_atom,
                                           uint32_t b, uint32_t b_atom) {
  const uint64_t da = desc_sw128(a, 16, 1024), db = desc_sw128(b, 16, 1024);
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks)
    wg_ss_n64(acc, desc_advance(da, (ks / 4) * a_atom + (ks % 4) * 32),
              desc_advance(db, (ks / 4) * b_atom + (ks % 4) * 32), ks > 0);
}
// d (64 × D) += A (64 × 16·(K1 − K0): register fragments K0..K1 − 1 of a 64 × 64 tile) · B (the
// matching rows of 64 at b, MN-major, atoms of `atom` bytes), issued (not committed).
template <int D, int K0 = 0, int K1 = 4>
__device__ __forceinline__ void issue_rs64(float (&d)[D / 8][4], const uint32_t (&a)[4][4],
                                           uint32_t b, uint32_t atom) {
  const uint64_t db = desc_sw128(b, atom, 1024);
#pragma unroll
  for (int kk = K0; kk < K1; ++kk) wg_rs_t<D>(d, a[kk], desc_advance(db, kk * 16 * 128));
}
// The backward kernels' ring of streamed tiles: kBwdStages deep (2: both kernels waited on the
// tensor copies, docs/BENCHMARKS.md session 10).
constexpr int kBwdStages = 4;
// Their barriers from `at`: once (a block's fixed tiles), full[s] (a ring stage's tiles: the
// producer's arrival and their bytes), empty[s] (the 8 consumer warps done with it).
struct BwdBarriers {
  uint32_t at;
  static constexpr int bytes = 8 * (1 + 2 * kBwdStages);
  __device__ uint32_t once() const { return at; }
  __device__ uint32_t full(int s) const { return at + 8 * (1 + s); }
  __device__ uint32_t empty(int s) const { return at + 8 * (1 + kBwdStages + s); }
  __device__ void init() const {  // by one thread, before a __syncthreads
    mbar_init(once(), 1);
    for (int s = 0; s < kBwdStages; ++s) mbar_init(full(s), 1), mbar_init(empty(s), 8);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
};
// Stage and phase of streamed tile i.
__device__ __forceinline__ int bwd_stage(int i) { return i % kBwdStages; }
__device__ __forceinline__ uint32_t bwd_phase(int i) { return (i / kBwdStages) & 1; }
struct BwdArgs {
  float *dq, *dk, *dv;
  const float *lse, *dsum;  // (T, H)
  int T, H, G;
};

constexpr int kQt = 64;                   // dk/dv: queries per streamed tile; dq: keys per tile
constexpr int kHalfAtom = kQt * 128;      // a 64-column atom of a 64-row tile

template <int D>
struct DqSmem {
  static constexpr int big = (D / 64) * kAtomBytes;   // 128 × D
  static constexpr int small = (D / 64) * kHalfAtom;  // 64 × D
  static constexpr int q = 0, dout = q + big, k = dout + big, v = k + kBwdStages * small;
  static constexpr int bars = v + kBwdStages * small;
  static constexpr int request = bars + BwdBarriers::bytes + 1024;
};

template <int D>
__global__ void __launch_bounds__(kThreads, 1)
    flash_backward_dq_wgmma_kernel(const __grid_constant__ CUtensorMap tq,
                                   const __grid_constant__ CUtensorMap tdo,
                                   const __grid_constant__ CUtensorMap tk,
                                   const __grid_constant__ CUtensorMap tv, BwdArgs a) {
  using L = DqSmem<D>;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = aligned_base(smem_raw);
  const BwdBarriers bar{base + L::bars};
  const uint32_t qdo_full = bar.once();
  auto kv_full = [&](int s) { return bar.full(s); };
  auto kv_empty = [&](int s) { return bar.empty(s); };
  const int nq = (a.T + kRows - 1) / kRows;
  const int qb = nq - 1 - (int)blockIdx.x / a.H, h = (int)blockIdx.x % a.H;
  const int hk = h / (a.H / a.G), t0 = qb * kRows;
  const int n_tiles = min(t0 + kRows - 1, a.T - 1) / kQt + 1;  // key tiles of 64 (causal)
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);  // warp-uniform to the compiler
  if (threadIdx.x == 0) bar.init();
  __syncthreads();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
    if (threadIdx.x == 0) {
      mbar_expect_tx(qdo_full, 2 * L::big);
      for (int c = 0; c < D / 64; ++c) {
        tma_load(base + L::q + c * kAtomBytes, &tq, c * 64, h, t0, qdo_full);
        tma_load(base + L::dout + c * kAtomBytes, &tdo, c * 64, h, t0, qdo_full);
      }
      for (int i = 0; i < n_tiles; ++i) {
        const int s = bwd_stage(i);
        mbar_wait(kv_empty(s), bwd_phase(i) ^ 1);
        mbar_expect_tx(kv_full(s), 2 * L::small);
        for (int c = 0; c < D / 64; ++c) {
          tma_load(base + L::k + s * L::small + c * kHalfAtom, &tk, c * 64, hk, i * kQt, kv_full(s));
          tma_load(base + L::v + s * L::small + c * kHalfAtom, &tv, c * 64, hk, i * kQt, kv_full(s));
        }
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");

  const int cw = wg - 1, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int gr = lane >> 2, gc = (lane & 3) * 2;
  const int row0 = t0 + 64 * cw + 16 * warp, wg_row0 = t0 + 64 * cw;
  const uint32_t q_wg = base + L::q + cw * 64 * 128, do_wg = base + L::dout + cw * 64 * 128;
  const float scale = kLog2e / sqrtf((float)D);
  // This thread's two rows: lse·log2e and dsum (rows past T: P = dS = 0).
  float lse2[2], dsum[2];
  bool live[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int t = row0 + gr + 8 * rr;
    live[rr] = t < a.T;
    lse2[rr] = live[rr] ? a.lse[(long)t * a.H + h] * kLog2e : 0.0f;
    dsum[rr] = live[rr] ? a.dsum[(long)t * a.H + h] : 0.0f;
  }
  float dq[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
  float s[8][4], dp[8][4];
  uint32_t ds[4][4];
  // dS of tile i from S, dP (in place in s): P = exp2(S·c − lse2), masked past the row or T on
  // the edge tiles only (`edge`, a type: the compares cost as much as the rest of the softmax).
  auto grad_scores = [&](int i, auto edge) {
    const int j0 = i * kQt;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        const int rr = x >> 1;
        float p = fast_exp2(fmaf(s[n][x], scale, -lse2[rr]));
        if constexpr (decltype(edge)::value)
          if (j0 + 8 * n + gc + (x & 1) > row0 + gr + 8 * rr || !live[rr]) p = 0.0f;
        s[n][x] = p * (dp[n][x] - dsum[rr]);  // dead rows: dsum = 0, dP finite (zero-filled tiles)
      }
  };
  mbar_wait(qdo_full, 0);
  for (int i = 0; i < n_tiles; ++i) {
    const int st = bwd_stage(i);
    mbar_wait(kv_full(st), bwd_phase(i));
    const uint32_t kb = base + L::k + st * L::small, vb = base + L::v + st * L::small;
    wg_fence();
    issue_ss64<D>(s, q_wg, kAtomBytes, kb, kHalfAtom);
    issue_ss64<D>(dp, do_wg, kAtomBytes, vb, kHalfAtom);
    wg_commit();
    if (i > 0) {  // dQ += dS(i − 1) K(i − 1)
      const uint32_t kp = base + L::k + bwd_stage(i - 1) * L::small;
      wg_fence();
      issue_rs64<D>(dq, ds, kp, kHalfAtom);
      wg_commit();
      wg_wait<1>();
    } else {
      wg_wait<0>();
    }
    if (i * kQt + kQt - 1 > wg_row0 || t0 + kRows > a.T)
      grad_scores(i, std::true_type{});
    else
      grad_scores(i, std::false_type{});
    if (i > 0) {
      wg_wait<0>();
      __syncwarp();
      if (lane == 0) mbar_arrive(kv_empty(bwd_stage(i - 1)));
    }
    pack_frags(ds, s);
  }
  {
    const uint32_t kp = base + L::k + bwd_stage(n_tiles - 1) * L::small;
    wg_fence();
    issue_rs64<D>(dq, ds, kp, kHalfAtom);
    wg_commit();
    wg_wait<0>();
  }
  const float inv_sqrt_d = 1.0f / sqrtf((float)D);
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    if (!live[rr]) continue;
    float* dst = a.dq + ((long)(row0 + gr + 8 * rr) * a.H + h) * D + gc;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<float2*>(dst + 8 * n) =
          make_float2(dq[n][2 * rr] * inv_sqrt_d, dq[n][2 * rr + 1] * inv_sqrt_d);
  }
}

template <int D>
struct DkvSmem {
  static constexpr int big = (D / 64) * kAtomBytes;   // 128 × D
  static constexpr int small = (D / 64) * kHalfAtom;  // 64 × D
  static constexpr int k = 0, v = k + big, q = v + big, dout = q + kBwdStages * small;
  static constexpr int cols = dout + kBwdStages * small;  // per consumer warpgroup [2][lse2 64, dsum 64]
  static constexpr int bars = cols + 2 * 2 * 2 * kQt * 4;
  static constexpr int request = bars + BwdBarriers::bytes + 1024;
};

template <int D>
__global__ void __launch_bounds__(kThreads, 1)
    flash_backward_dkdv_wgmma_kernel(const __grid_constant__ CUtensorMap tq,
                                     const __grid_constant__ CUtensorMap tdo,
                                     const __grid_constant__ CUtensorMap tk,
                                     const __grid_constant__ CUtensorMap tv, BwdArgs a) {
  using L = DkvSmem<D>;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = aligned_base(smem_raw);
  const BwdBarriers bar{base + L::bars};
  const uint32_t kv_full = bar.once();
  auto full = [&](int s) { return bar.full(s); };
  auto empty = [&](int s) { return bar.empty(s); };
  const int nqt = (a.T + kQt - 1) / kQt;
  const int kb = (int)blockIdx.x / a.G, g = (int)blockIdx.x % a.G;  // key block 0 (longest) first
  const int j0 = kb * kRows, group = a.H / a.G;
  const int qt0 = j0 / kQt, per_head = nqt - qt0, n_tiles = group * per_head;
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);  // warp-uniform to the compiler
  if (threadIdx.x == 0) bar.init();
  __syncthreads();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
    if (threadIdx.x == 0) {
      mbar_expect_tx(kv_full, 2 * L::big);
      for (int c = 0; c < D / 64; ++c) {
        tma_load(base + L::k + c * kAtomBytes, &tk, c * 64, g, j0, kv_full);
        tma_load(base + L::v + c * kAtomBytes, &tv, c * 64, g, j0, kv_full);
      }
      for (int i = 0; i < n_tiles; ++i) {
        const int s = bwd_stage(i), h = g * group + i / per_head, qt = qt0 + i % per_head;
        mbar_wait(empty(s), bwd_phase(i) ^ 1);
        mbar_expect_tx(full(s), 2 * L::small);
        for (int c = 0; c < D / 64; ++c) {
          tma_load(base + L::q + s * L::small + c * kHalfAtom, &tq, c * 64, h, qt * kQt, full(s));
          tma_load(base + L::dout + s * L::small + c * kHalfAtom, &tdo, c * 64, h, qt * kQt, full(s));
        }
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");

  float* col_buf = reinterpret_cast<float*>(
      smem_raw + (base - static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw))) + L::cols +
      (wg - 1) * 2 * 2 * kQt * 4);
  const int cw = wg - 1, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int gr = lane >> 2, gc = (lane & 3) * 2;
  const int key0 = j0 + 64 * cw + 16 * warp, wg_key0 = j0 + 64 * cw;  // this warp's first key
  const uint32_t k_wg = base + L::k + cw * 64 * 128, v_wg = base + L::v + cw * 64 * 128;
  const float scale = kLog2e / sqrtf((float)D);
  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int x = 0; x < 4; ++x) dk[n][x] = dv[n][x] = 0.0f;
  float s[8][4], dp[8][4];
  uint32_t pf[4][4], dsf[4][4];
  // Column k % 64 of tile i, as loaded: lse (k < 64) or dsum, for this thread's k (past T: masked).
  auto column_raw = [&](int i) {
    const int k = threadIdx.x % 128, h = g * group + i / per_head;
    const long at = (long)min((qt0 + i % per_head) * kQt + (k % kQt), a.T - 1) * a.H + h;
    return k < kQt ? a.lse[at] : a.dsum[at];
  };
  // Tile i's 64 columns of lse·log2e and dsum into this warpgroup's buffer (one value a thread,
  // loaded a tile ahead, scaled here; two buffers by tile parity); a warpgroup barrier follows.
  auto store_columns = [&](int i, float raw) {
    const int k = threadIdx.x % 128;
    col_buf[(i & 1) * 2 * kQt + k] = k < kQt ? raw * kLog2e : raw;
  };
  auto columns_ready = [&]() { asm volatile("bar.sync %0, 128;\n" ::"r"(3 + cw) : "memory"); };
  // Sᵀ = K Qᵀ and dPᵀ = V dOᵀ of tile i, issued once its tiles have landed.
  auto issue_scores = [&](int i) {
    const int st = bwd_stage(i);
    mbar_wait(full(st), bwd_phase(i));
    wg_fence();
    issue_ss64<D>(s, k_wg, kAtomBytes, base + L::q + st * L::small, kHalfAtom);
    issue_ss64<D>(dp, v_wg, kAtomBytes, base + L::dout + st * L::small, kHalfAtom);
    wg_commit();
  };
  // Pᵀ (key row, query column) and dSᵀ of tile i from the scores, straight into the A fragments
  // (the accumulators stay wgmma's alone: no copies); on the edge tiles (`edge`) masked where the
  // query precedes the key or is past T — the compares cost as much as the rest.
  auto grad_scores = [&](int i, int q0, auto half, auto edge) {
    const float* cols = col_buf + (i & 1) * 2 * kQt;
#pragma unroll
    for (int n = 4 * decltype(half)::value; n < 4 * decltype(half)::value + 4; ++n) {
      const int c = 8 * n + gc;
      const float2 l2 = *reinterpret_cast<const float2*>(cols + c);
      const float2 d2 = *reinterpret_cast<const float2*>(cols + kQt + c);
      float pv[4], dsv[4];
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        pv[x] = fast_exp2(fmaf(s[n][x], scale, -((x & 1) ? l2.y : l2.x)));
        if constexpr (decltype(edge)::value) {
          const int t = q0 + c + (x & 1), j = key0 + gr + 8 * (x >> 1);
          if (t < j || t >= a.T) pv[x] = 0.0f;
        }
        dsv[x] = pv[x] * (dp[n][x] - ((x & 1) ? d2.y : d2.x));
      }
      const int kk = n / 2, half = 2 * (n % 2);
      pf[kk][half] = pack_bf16(pv[0], pv[1]), pf[kk][half + 1] = pack_bf16(pv[2], pv[3]);
      dsf[kk][half] = pack_bf16(dsv[0], dsv[1]), dsf[kk][half + 1] = pack_bf16(dsv[2], dsv[3]);
    }
  };
  mbar_wait(kv_full, 0);
  float col_next = column_raw(0);
  for (int i = 0; i < n_tiles; ++i) {
    const int st = bwd_stage(i), q0 = (qt0 + i % per_head) * kQt;
    const uint32_t qb = base + L::q + st * L::small, dob = base + L::dout + st * L::small;
    issue_scores(i);
    store_columns(i, col_next);
    if (i + 1 < n_tiles) col_next = column_raw(i + 1);
    columns_ready();
    wg_wait<0>();
    // dV += Pᵀ dO, dK += dSᵀ Q in two halves of 32 queries: the first half's products run while
    // the second half's P, dS are computed (the same order of accumulation as in one go).
    const bool edge = q0 < wg_key0 + 63 || q0 + kQt > a.T;
    auto grads = [&](auto half) {
      if (edge)
        grad_scores(i, q0, half, std::true_type{});
      else
        grad_scores(i, q0, half, std::false_type{});
    };
    grads(std::integral_constant<int, 0>{});
    wg_fence();
    issue_rs64<D, 0, 2>(dv, pf, dob, kHalfAtom);
    issue_rs64<D, 0, 2>(dk, dsf, qb, kHalfAtom);
    grads(std::integral_constant<int, 1>{});
    wg_fence();
    issue_rs64<D, 2, 4>(dv, pf, dob, kHalfAtom);
    issue_rs64<D, 2, 4>(dk, dsf, qb, kHalfAtom);
    wg_commit();
    wg_wait<0>();
    __syncwarp();
    if (lane == 0) mbar_arrive(empty(st));
  }
  const float inv_sqrt_d = 1.0f / sqrtf((float)D);
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int j = key0 + gr + 8 * rr;
    if (j >= a.T) continue;
    float* pk = a.dk + ((long)j * a.G + g) * D + gc;
    float* pv = a.dv + ((long)j * a.G + g) * D + gc;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      *reinterpret_cast<float2*>(pk + 8 * n) =
          make_float2(dk[n][2 * rr] * inv_sqrt_d, dk[n][2 * rr + 1] * inv_sqrt_d);
      *reinterpret_cast<float2*>(pv + 8 * n) = make_float2(dv[n][2 * rr], dv[n][2 * rr + 1]);
    }
  }
}

// ---- host ------------------------------------------------------------------------------------

using EncodeTiled = PFN_cuTensorMapEncodeTiled_v12000;

Status encoder(EncodeTiled* fn) {
  static EncodeTiled cached = nullptr;
  static cudaError_t err = cudaSuccess;
  static std::once_flag once;
  std::call_once(once, [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q);
    if (err == cudaSuccess && q == cudaDriverEntryPointSuccess) cached = reinterpret_cast<EncodeTiled>(p);
  });
  if (!cached)
    return make_error("attention: cuTensorMapEncodeTiled is not available (",
                      cudaGetErrorString(err), ")");
  *fn = cached;
  return ok_status();
}

// The (D, heads, T) view of a (T, heads, D) bf16 tensor, boxes of `rows` rows × 64 columns.
Status tensor_map(CUtensorMap* map, EncodeTiled encode, const bf16* p, int T, int heads, int D,
                  int rows = kRows) {
  const cuuint64_t dims[3] = {(cuuint64_t)D, (cuuint64_t)heads, (cuuint64_t)T};
  const cuuint64_t strides[2] = {(cuuint64_t)D * 2, (cuuint64_t)heads * D * 2};
  const cuuint32_t box[3] = {64, 1, (cuuint32_t)rows};
  const cuuint32_t elem[3] = {1, 1, 1};
  const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<bf16*>(p), dims,
                            strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return make_error("attention: cuTensorMapEncodeTiled failed (", (int)r, ") for T=", T,
                      " heads=", heads, " D=", D);
  return ok_status();
}

template <int D>
Status launch(bf16* y, float* lse, const bf16* q, const bf16* k, const bf16* v, int T, int H, int G,
              cudaStream_t stream) {
  EncodeTiled encode;
  GL_TRY(encoder(&encode));
  CUtensorMap tq, tk, tv;
  GL_TRY(tensor_map(&tq, encode, q, T, H, D));
  GL_TRY(tensor_map(&tk, encode, k, T, G, D));
  GL_TRY(tensor_map(&tv, encode, v, T, G, D));
  auto kernel = flash_forward_wgmma_kernel<D>;
  GL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     Smem<D>::request));
  const long blocks = (long)((T + kRows - 1) / kRows) * H;
  kernel<<<(unsigned)blocks, kThreads, Smem<D>::request, stream>>>(tq, tk, tv, Args{y, lse, T, H, G});
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}


template <int D>
Status launch_backward(const BwdArgs& a, const bf16* q, const bf16* k, const bf16* v,
                       const bf16* dob, cudaStream_t stream) {
  EncodeTiled encode;
  GL_TRY(encoder(&encode));
  CUtensorMap tq, tdo, tk, tv;
  // dq: Q, dO in blocks of 128 queries, K, V streamed in tiles of 64 keys.
  GL_TRY(tensor_map(&tq, encode, q, a.T, a.H, D));
  GL_TRY(tensor_map(&tdo, encode, dob, a.T, a.H, D));
  GL_TRY(tensor_map(&tk, encode, k, a.T, a.G, D, kQt));
  GL_TRY(tensor_map(&tv, encode, v, a.T, a.G, D, kQt));
  auto dq_kernel = flash_backward_dq_wgmma_kernel<D>;
  GL_CUDA_CHECK(cudaFuncSetAttribute(dq_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     DqSmem<D>::request));
  const int nq = (a.T + kRows - 1) / kRows;
  dq_kernel<<<(unsigned)((long)nq * a.H), kThreads, DqSmem<D>::request, stream>>>(tq, tdo, tk, tv, a);
  GL_CUDA_CHECK_LAUNCH();
  // dk, dv: K, V in blocks of 128 keys, Q, dO streamed in tiles of 64 queries.
  GL_TRY(tensor_map(&tq, encode, q, a.T, a.H, D, kQt));
  GL_TRY(tensor_map(&tdo, encode, dob, a.T, a.H, D, kQt));
  GL_TRY(tensor_map(&tk, encode, k, a.T, a.G, D));
  GL_TRY(tensor_map(&tv, encode, v, a.T, a.G, D));
  auto dkdv_kernel = flash_backward_dkdv_wgmma_kernel<D>;
  GL_CUDA_CHECK(cudaFuncSetAttribute(dkdv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     DkvSmem<D>::request));
  dkdv_kernel<<<(unsigned)((long)nq * a.G), kThreads, DkvSmem<D>::request, stream>>>(tq, tdo, tk, tv, a);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

}  // namespace

bool attention_wgmma_applies(int D, AttentionMaskSpec mask) {
  return mask.window < 0 && (D == 64 || D == 128);
}

Status attention_forward_wgmma(bf16* y, float* lse, const bf16* q, const bf16* k, const bf16* v,
                               int T, int H, int G, int D, cudaStream_t stream) {
  if (((uintptr_t)q | (uintptr_t)k | (uintptr_t)v) % 16 != 0)
    return make_error("attention_forward: q, k, v must be 16-byte aligned for the tensor copies");
  return dispatch_head_dim(D, [&](auto d) -> Status {
    return launch<decltype(d)::value>(y, lse, q, k, v, T, H, G, stream);
  });
}

Status attention_backward_wgmma(float* dq, float* dk, float* dv, const bf16* q, const bf16* k,
                                const bf16* v, const bf16* dob, const float* lse,
                                const float* dsum, int T, int H, int G, int D,
                                cudaStream_t stream) {
  if (((uintptr_t)q | (uintptr_t)k | (uintptr_t)v | (uintptr_t)dob) % 16 != 0)
    return make_error("attention_backward: q, k, v and dO must be 16-byte aligned for the tensor copies");
  const BwdArgs a{dq, dk, dv, lse, dsum, T, H, G};
  return dispatch_head_dim(D, [&](auto d) -> Status {
    return launch_backward<decltype(d)::value>(a, q, k, v, dob, stream);
  });
}

}  // namespace golinear::kernels::cuda::detail
