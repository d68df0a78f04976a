// Gated linear attention with a diagonal decay on the GPU (gated_linear.h). Tensor-core tiles are
// wmma m16n16k16 (bf16 operands, fp32 accumulators) read from shared memory; every elementwise
// decay factor is applied in fp32 between products. Shared-memory rows are padded (bf16 +8,
// fp32 +4 elements) against bank conflicts and keep every wmma tile 32-byte aligned.
#include "kernels/cuda/gated_linear.h"

#include <mma.h>

#include <algorithm>
#include <type_traits>

#include "kernels/cuda/device_utils.cuh"

namespace golinear::kernels::cuda {

namespace {

using namespace nvcuda;
using device::cp_async16;
using device::cp_async_commit;
using device::cp_async_wait;

constexpr int kC = kGatedLinearChunk;  // 64 tokens per chunk
constexpr int kThreads = 256;          // chunk-parallel kernels
constexpr int kPassThreads = 128;      // state passes
constexpr int kTV = 32;                // value columns per state-pass tile
constexpr int kStages = 4;             // state-pass cp.async stages

using device::align_up;

// Shared-memory shapes for head dims DK (keys) and DV (values).
template <int DK, int DV>
struct Shapes {
  static constexpr int LK = DK + 8, LV = DV + 8, LC = kC + 8;  // bf16 row strides
  static constexpr int FK = DK + 4, FV = DV + 4, FC = kC + 4;  // fp32 row strides
  static constexpr size_t bk = align_up(kC * LK * 2, 128), bv = align_up(kC * LV * 2, 128),
                          bc = align_up(kC * LC * 2, 128);
  static constexpr size_t fk = align_up(kC * FK * 4, 128), fv = align_up(kC * FV * 4, 128),
                          fc = align_up(kC * FC * 4, 128);
  static constexpr size_t st = align_up((size_t)DK * LV * 2, 128);  // a bf16 (DK, DV) state
  static constexpr size_t sub = align_up(96 * LK * 2, 128);         // the sub-chunk factor sections
  static constexpr size_t tot = align_up(4 * DK * 4, 128);          // scan segment totals
  // kernel 1 (prepare): q (then q̃), k, b, k̃, A (fp32), tot
  static constexpr size_t prep = bk * 2 + fk + sub + fc + tot;
  // kernel 3 (output): q̄, S, A, V, O (fp32)
  static constexpr size_t out = bk + st + bc + bv + fv;
  // kernel 4 (dq): dO+V | T, k, b, S | k̃, dA fp32, dA bf16, acc, tot
  static constexpr size_t r_dov = std::max(2 * bv, fk), r_s = std::max(st, sub);
  static constexpr size_t dq = r_dov + bk + fk + r_s + fc + bc + fk + tot;
  // kernel 5 (dk, dv, dg): q, k, b, dA, dS | q̂, X, dO+A+k̄ | T, V, tot
  static constexpr size_t r_x = std::max(fk, fv),
                          r_3 = std::max(bv + bc + bk, align_up(48 * FK * 4, 128));
  static constexpr size_t dkv = bk * 2 + fk + bc + r_s + r_x + r_3 + bv + tot;
  // state pass: X (fp32 64×kTV) + kStages stages of (a 64×64 bf16, b and the next state
  // 64×kTV bf16, 64 decays)
  static constexpr int LT = kTV + 8, FT = kTV + 4;
  static constexpr size_t stage = bc + 2 * align_up(kC * LT * 2, 128) + align_up(kC * 4, 128);
  static constexpr size_t pass = align_up(kC * FT * 4, 128) + kStages * stage;
};

// Offsets of the first row of sub-chunk sections: k̃^{(I)} (rows m < 16I, I = 1..3) at
// 16·I(I−1)/2; q̂^{(J)} (rows i ≥ 16(J+1), J = 0..2) at 48J − 8J(J−1).
__host__ __device__ constexpr int ksec(int I) { return 8 * I * (I - 1); }
__host__ __device__ constexpr int qsec(int J) { return 48 * J - 8 * J * (J - 1); }

// rows × COLS elements of T from global rows src + r·stride into shared rows dst + r·ld
// (cp.async, 16 bytes each); rows ≥ valid are zero-filled.
template <class T, int COLS>
__device__ __forceinline__ void load_rows(T* dst, int ld, const T* src, long stride, int rows,
                                          int valid) {
  constexpr int PER = 16 / sizeof(T), CH = COLS / PER;
  for (int idx = threadIdx.x; idx < rows * CH; idx += blockDim.x) {
    const int r = idx / CH, c = idx % CH;
    const bool ok = r < valid;
    cp_async16(dst + r * ld + c * PER, ok ? src + r * stride + c * PER : src, ok);
  }
}

// Inclusive prefix sums down the 64 rows of B (row stride ldb), DK channels; REVERSE: suffix
// sums. 256 threads; tot holds 4·DK floats. Ends with a barrier.
template <int DK, bool REVERSE>
__device__ __forceinline__ void chunk_scan(float* B, int ldb, float* tot) {
  constexpr int SEGS = kThreads / DK, LEN = kC / SEGS;
  const int d = threadIdx.x % DK, s = threadIdx.x / DK, r0 = s * LEN;
  float run = 0.0f;
#pragma unroll 8
  for (int j = 0; j < LEN; ++j) {
    const int r = REVERSE ? r0 + LEN - 1 - j : r0 + j;
    run += B[r * ldb + d];
    B[r * ldb + d] = run;
  }
  tot[s * DK + d] = run;
  __syncthreads();
  float off = 0.0f;
#pragma unroll
  for (int s2 = 0; s2 < SEGS; ++s2)
    if (REVERSE ? s2 > s : s2 < s) off += tot[s2 * DK + d];
#pragma unroll 8
  for (int j = 0; j < LEN; ++j) B[(r0 + j) * ldb + d] += off;
  __syncthreads();
}

// One 16×16 output tile C (row stride ldc) = [C +] A·B over K (a multiple of 16), by one warp.
// A points at the tile's rows: element (r, kk) at TA ? A[kk·lda + r] : A[r·lda + kk];
// B at the tile's columns: element (kk, c) at TB ? B[c·ldb + kk] : B[kk·ldb + c].
template <bool TA, bool TB>
__device__ __forceinline__ void mma_tile(float* C, int ldc, const bf16* A, int lda, const bf16* B,
                                         int ldb, int K, bool accumulate) {
  using LA = std::conditional_t<TA, wmma::col_major, wmma::row_major>;
  using LB = std::conditional_t<TB, wmma::col_major, wmma::row_major>;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  if (accumulate) wmma::load_matrix_sync(acc, C, ldc, wmma::mem_row_major);
  else wmma::fill_fragment(acc, 0.0f);
  for (int kk = 0; kk < K / 16; ++kk) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, LA> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, LB> b;
    wmma::load_matrix_sync(a, TA ? A + kk * 16 * lda : A + kk * 16, lda);
    wmma::load_matrix_sync(b, TB ? B + kk * 16 : B + kk * 16 * ldb, ldb);
    wmma::mma_sync(acc, a, b, acc);
  }
  wmma::store_matrix_sync(C, acc, ldc, wmma::mem_row_major);
}

// C (M×N, row stride ldc) = [C +] A·B over K, tiles dealt to the block's warps (no barrier).
template <bool TA, bool TB>
__device__ __forceinline__ void block_mma(float* C, int ldc, const bf16* A, int lda, const bf16* B,
                                          int ldb, int M, int N, int K, bool accumulate) {
  const int warp = threadIdx.x / 32, nw = blockDim.x / 32, tn = N / 16;
  for (int t = warp; t < (M / 16) * tn; t += nw) {
    const int mt = t / tn, nt = t % tn;
    mma_tile<TA, TB>(C + mt * 16 * ldc + nt * 16, ldc, TA ? A + mt * 16 : A + mt * 16 * lda, lda,
                     TB ? B + nt * 16 * ldb : B + nt * 16, ldb, K, accumulate);
  }
}

__device__ __forceinline__ float bf(bf16 x) { return __bfloat162float(x); }

// Workspace carve-up (shared by the launchers and the byte counts).
struct Ws {
  bf16 *qbar = nullptr, *kbar = nullptr, *A = nullptr, *ckpt = nullptr, *dckpt = nullptr,
       *dA = nullptr;
  float *decay = nullptr, *rowdot = nullptr;
};
size_t carve(char* p, int N, int H, int Dk, int Dv, bool backward, Ws* w) {
  const size_t NC = (size_t)(N + kC - 1) / kC;
  size_t off = 0;
  auto take = [&](size_t bytes) {
    char* r = p ? p + off : nullptr;
    off += align_up(bytes);
    return r;
  };
  Ws ws;
  ws.qbar = reinterpret_cast<bf16*>(take((size_t)N * H * Dk * 2));
  ws.kbar = reinterpret_cast<bf16*>(take((size_t)N * H * Dk * 2));
  ws.A = reinterpret_cast<bf16*>(take(NC * H * kC * kC * 2));
  ws.decay = reinterpret_cast<float*>(take(NC * H * Dk * 4));
  ws.ckpt = reinterpret_cast<bf16*>(take(NC * H * Dk * Dv * 2));
  if (backward) {
    ws.dckpt = reinterpret_cast<bf16*>(take(NC * H * Dk * Dv * 2));
    ws.dA = reinterpret_cast<bf16*>(take(NC * H * kC * kC * 2));
    ws.rowdot = reinterpret_cast<float*>(take(NC * H * (Dv / kTV) * Dk * 4));
  }
  if (w) *w = ws;
  return off;
}

// ---- kernel 1: prepare ------------------------------------------------------------------------
// Grid (chunks, H); ~112 KB of shared memory for DK = 128 (two blocks per SM). Writes q̄, k̄
// (N, H, DK) bf16, decay (H, NC, DK) = e^{b_last}, A (H, NC, 64, 64) bf16 (zero above the
// diagonal).
template <int DK, int DV>
__global__ void __launch_bounds__(kThreads, 2) gla_prepare_kernel(
    bf16* __restrict__ qbar, bf16* __restrict__ kbar, float* __restrict__ decay,
    bf16* __restrict__ A_out, const bf16* __restrict__ q, const bf16* __restrict__ k,
    const float* __restrict__ g, int N, int H) {
  using Sh = Shapes<DK, DV>;
  constexpr int LK = Sh::LK, FK = Sh::FK, FC = Sh::FC;
  extern __shared__ __align__(128) char smem[];
  bf16* qs = reinterpret_cast<bf16*>(smem);  // q, then q̃ in place
  bf16* ks = reinterpret_cast<bf16*>(smem + Sh::bk);
  float* b = reinterpret_cast<float*>(smem + 2 * Sh::bk);
  bf16* kt = reinterpret_cast<bf16*>(smem + 2 * Sh::bk + Sh::fk);
  float* Af = reinterpret_cast<float*>(smem + 2 * Sh::bk + Sh::fk + Sh::sub);
  float* tot = reinterpret_cast<float*>(smem + 2 * Sh::bk + Sh::fk + Sh::sub + Sh::fc);
  const int c = blockIdx.x, h = blockIdx.y, NC = gridDim.x, n0 = c * kC;
  const int L = min(kC, N - n0);
  const long row0 = (long)n0 * H + h;
  load_rows<bf16, DK>(qs, LK, q + row0 * DK, (long)H * DK, kC, L);
  load_rows<bf16, DK>(ks, LK, k + row0 * DK, (long)H * DK, kC, L);
  if (g) load_rows<float, DK>(b, FK, g + row0 * DK, (long)H * DK, kC, L);
  else
    for (int idx = threadIdx.x; idx < kC * DK; idx += kThreads) b[(idx / DK) * FK + idx % DK] = 0.0f;
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  chunk_scan<DK, false>(b, FK, tot);

  // Factors: q̄, k̄ to global; the k̃ sections (reference: the query sub-chunk's first row).
  for (int idx = threadIdx.x; idx < kC * DK / 2; idx += kThreads) {
    const int i = idx / (DK / 2), d = 2 * (idx % (DK / 2));
    const float b0 = b[i * FK + d], b1 = b[i * FK + d + 1];
    const float k0 = bf(ks[i * LK + d]), k1 = bf(ks[i * LK + d + 1]);
    if (i < L) {
      const float q0 = bf(qs[i * LK + d]), q1 = bf(qs[i * LK + d + 1]);
      const float l0 = b[(kC - 1) * FK + d], l1 = b[(kC - 1) * FK + d + 1];
      const long r = (row0 + (long)i * H) * DK + d;
      *reinterpret_cast<__nv_bfloat162*>(qbar + r) =
          __floats2bfloat162_rn(q0 * __expf(b0), q1 * __expf(b1));
      *reinterpret_cast<__nv_bfloat162*>(kbar + r) =
          __floats2bfloat162_rn(k0 * __expf(l0 - b0), k1 * __expf(l1 - b1));
    }
    for (int I = i / 16 + 1; I < 4; ++I)
      *reinterpret_cast<__nv_bfloat162*>(kt + (ksec(I) + i) * LK + d) =
          __floats2bfloat162_rn(k0 * __expf(b[16 * I * FK + d] - b0),
                                k1 * __expf(b[16 * I * FK + d + 1] - b1));
  }
  for (int d = threadIdx.x; d < DK; d += kThreads)
    decay[((long)h * NC + c) * DK + d] = __expf(b[(kC - 1) * FK + d]);
  // Diagonal blocks exactly: A_im = Σ_d q_id k_md e^{b_id − b_md}, m ≤ i in one sub-chunk
  // (136 pairs per block, enumerated row by row).
  for (int idx = threadIdx.x; idx < 4 * 136; idx += kThreads) {
    const int blk = idx / 136, p = idx % 136;
    int il = (int)((sqrtf(8.0f * p + 1.0f) - 1.0f) * 0.5f);
    if ((il + 1) * (il + 2) / 2 <= p) ++il;
    if (il * (il + 1) / 2 > p) --il;
    const int i = blk * 16 + il, m = blk * 16 + p - il * (il + 1) / 2;
    float a = 0.0f;
#pragma unroll 8
    for (int d = 0; d < DK; ++d)
      a += bf(qs[i * LK + d]) * bf(ks[m * LK + d]) * __expf(b[i * FK + d] - b[m * FK + d]);
    Af[i * FC + m] = a;
  }
  __syncthreads();
  // q̃ = q ⊙ e^{b − b_{I0}} in place (reference: the row's sub-chunk's first row).
  for (int idx = threadIdx.x; idx < kC * DK; idx += kThreads) {
    const int i = idx / DK, d = idx % DK, I0 = (i / 16) * 16;
    qs[i * LK + d] = __float2bfloat16(bf(qs[i * LK + d]) * __expf(b[i * FK + d] - b[I0 * FK + d]));
  }
  __syncthreads();
  // Off-diagonal sub-chunk blocks (I > J) on tensor cores, one tile per warp.
  const int warp = threadIdx.x / 32;
  if (warp < 6) {
    const int I = warp < 1 ? 1 : warp < 3 ? 2 : 3, J = warp - (I * (I - 1)) / 2;
    mma_tile<false, true>(Af + I * 16 * FC + J * 16, FC, qs + I * 16 * LK, LK,
                          kt + (ksec(I) + J * 16) * LK, LK, DK, false);
  }
  __syncthreads();
  bf16* Ac = A_out + ((long)h * NC + c) * kC * kC;
  for (int idx = threadIdx.x; idx < kC * kC; idx += kThreads) {
    const int i = idx / kC, m = idx % kC;
    Ac[idx] = __float2bfloat16(m <= i ? Af[i * FC + m] : 0.0f);
  }
}

// ---- kernel 2: state pass (forward and reverse) -------------------------------------------------
// Grid (DV/kTV, DK/64, H), 128 threads; a 64×kTV fp32 tile X of the state (forward) or of its
// gradient (REVERSE) in shared memory, kStages-deep cp.async prefetch. Per chunk c (ascending;
// descending when REVERSE): store X (bf16) as out[h][c]; REVERSE: rowdot[h][c][tile] =
// Σ_e states[h][c+1] ∘ X (0 for the last chunk); then X ← diag(decay[h][c]) X + xaᵀ xb with
// xa (N, H, DK), xb (N, H, DV).
template <int DK, int DV, bool REVERSE>
__global__ void __launch_bounds__(kPassThreads) gla_state_pass_kernel(
    bf16* __restrict__ out, float* __restrict__ state_final, const float* __restrict__ state_init,
    const bf16* __restrict__ xa, const bf16* __restrict__ xb, const float* __restrict__ decay,
    const bf16* __restrict__ states, float* __restrict__ rowdot, int N, int H) {
  using Sh = Shapes<DK, DV>;
  constexpr int LC = Sh::LC, LT = Sh::LT, FT = Sh::FT;
  extern __shared__ __align__(128) char smem[];
  float* X = reinterpret_cast<float*>(smem);
  char* stages = smem + align_up(kC * FT * 4, 128);
  const int e0 = blockIdx.x * kTV, d0 = blockIdx.y * 64, h = blockIdx.z;
  const int NC = (N + kC - 1) / kC, tid = threadIdx.x;
  auto stage_a = [&](int s) { return reinterpret_cast<bf16*>(stages + s * Sh::stage); };
  auto stage_b = [&](int s) { return reinterpret_cast<bf16*>(stages + s * Sh::stage + Sh::bc); };
  auto stage_d = [&](int s) {
    return reinterpret_cast<float*>(stages + s * Sh::stage + Sh::bc +
                                    2 * align_up(kC * LT * 2, 128));
  };
  auto stage_n = [&](int s) {  // REVERSE: the tile of states[h][c + 1]
    return reinterpret_cast<bf16*>(stages + s * Sh::stage + Sh::bc + align_up(kC * LT * 2, 128));
  };
  auto issue = [&](int step) {
    if (step < NC) {
      const int c = REVERSE ? NC - 1 - step : step, s = step % kStages;
      const int n0 = c * kC, L = min(kC, N - n0);
      const long row0 = (long)n0 * H + h;
      load_rows<bf16, 64>(stage_a(s), LC, xa + row0 * DK + d0, (long)H * DK, kC, L);
      load_rows<bf16, kTV>(stage_b(s), LT, xb + row0 * DV + e0, (long)H * DV, kC, L);
      load_rows<float, 64>(stage_d(s), 64, decay + ((long)h * NC + c) * DK + d0, 0, 1, 1);
      if (REVERSE) {
        const bool has_next = c + 1 < NC;
        load_rows<bf16, kTV>(stage_n(s), LT,
                             has_next ? states + (((long)h * NC + c + 1) * DK + d0) * DV + e0
                                      : states,
                             DV, 64, has_next ? 64 : 0);
      }
    }
    cp_async_commit();  // possibly empty: one group per step keeps the wait count uniform
  };
  for (int idx = tid; idx < 64 * kTV; idx += kPassThreads) {
    const int d = idx / kTV, e = idx % kTV;
    X[d * FT + e] =
        (!REVERSE && state_init) ? state_init[((long)h * DK + d0 + d) * DV + e0 + e] : 0.0f;
  }
  for (int step = 0; step < kStages - 1; ++step) issue(step);
  for (int step = 0; step < NC; ++step) {
    const int c = REVERSE ? NC - 1 - step : step, s = step % kStages;
    issue(step + kStages - 1);  // into the stage consumed by step − 1 (barrier at its end)
    cp_async_wait<kStages - 1>();
    __syncthreads();
    if (REVERSE) {  // the row dots with the state leaving chunk c (prefetched; zero for the last)
      const int d = tid / 2, half = tid % 2;
      constexpr int HALF = kTV / 2;
      const bf16* sn = stage_n(s) + d * LT + half * HALF;
      float acc = 0.0f;
#pragma unroll 8
      for (int e = 0; e < HALF; ++e) acc += bf(sn[e]) * X[d * FT + half * HALF + e];
      acc += __shfl_xor_sync(0xffffffffu, acc, 1);
      if (half == 0) rowdot[(((long)h * NC + c) * (DV / kTV) + blockIdx.x) * DK + d0 + d] = acc;
      __syncthreads();
    }
    // Store X (bf16) and decay it, each element by the thread that stores it.
    bf16* o = out + (((long)h * NC + c) * DK + d0) * DV + e0;
    const float* dec = stage_d(s);
    for (int idx = tid; idx < 64 * kTV / 2; idx += kPassThreads) {
      const int d = idx / (kTV / 2), e = 2 * (idx % (kTV / 2));
      const float x0 = X[d * FT + e], x1 = X[d * FT + e + 1], a = dec[d];
      *reinterpret_cast<__nv_bfloat162*>(o + (long)d * DV + e) = __floats2bfloat162_rn(x0, x1);
      X[d * FT + e] = a * x0;
      X[d * FT + e + 1] = a * x1;
    }
    __syncthreads();
    block_mma<true, false>(X, FT, stage_a(s), LC, stage_b(s), LT, 64, kTV, kC, true);
    __syncthreads();
  }
  cp_async_wait<0>();
  if (!REVERSE && state_final)
    for (int idx = tid; idx < 64 * kTV; idx += kPassThreads) {
      const int d = idx / kTV, e = idx % kTV;
      state_final[((long)h * DK + d0 + d) * DV + e0 + e] = X[d * FT + e];
    }
}

// ---- kernel 3: output -------------------------------------------------------------------------
// Grid (chunks, H): o = q̄ S_c + A V.
template <int DK, int DV>
__global__ void __launch_bounds__(kThreads) gla_output_kernel(
    bf16* __restrict__ o, const bf16* __restrict__ qbar, const bf16* __restrict__ ckpt,
    const bf16* __restrict__ A, const bf16* __restrict__ v, int N, int H) {
  using Sh = Shapes<DK, DV>;
  constexpr int LK = Sh::LK, LV = Sh::LV, LC = Sh::LC, FV = Sh::FV;
  extern __shared__ __align__(128) char smem[];
  bf16* qs = reinterpret_cast<bf16*>(smem);
  bf16* Ss = reinterpret_cast<bf16*>(smem + Sh::bk);
  bf16* As = reinterpret_cast<bf16*>(smem + Sh::bk + Sh::st);
  bf16* vs = reinterpret_cast<bf16*>(smem + Sh::bk + Sh::st + Sh::bc);
  float* O = reinterpret_cast<float*>(smem + Sh::bk + Sh::st + Sh::bc + Sh::bv);
  const int c = blockIdx.x, h = blockIdx.y, NC = gridDim.x, n0 = c * kC;
  const int L = min(kC, N - n0);
  const long row0 = (long)n0 * H + h;
  load_rows<bf16, DK>(qs, LK, qbar + row0 * DK, (long)H * DK, kC, L);
  load_rows<bf16, DV>(Ss, LV, ckpt + ((long)h * NC + c) * DK * DV, DV, DK, DK);
  load_rows<bf16, kC>(As, LC, A + ((long)h * NC + c) * kC * kC, kC, kC, kC);
  load_rows<bf16, DV>(vs, LV, v + row0 * DV, (long)H * DV, kC, L);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  block_mma<false, false>(O, FV, qs, LK, Ss, LV, kC, DV, DK, false);
  __syncthreads();
  block_mma<false, false>(O, FV, As, LC, vs, LV, kC, DV, kC, true);
  __syncthreads();
  for (int idx = threadIdx.x; idx < L * DV / 2; idx += kThreads) {
    const int i = idx / (DV / 2), e = 2 * (idx % (DV / 2));
    *reinterpret_cast<__nv_bfloat162*>(o + (row0 + (long)i * H) * DV + e) =
        __floats2bfloat162_rn(O[i * FV + e], O[i * FV + e + 1]);
  }
}

// ---- kernel 4: dq -----------------------------------------------------------------------------
// Grid (chunks, H). dA = lower(dO Vᵀ) (also stored, bf16), dq = e^b ⊙ (dO S_cᵀ) + intra.
template <int DK, int DV>
__global__ void __launch_bounds__(kThreads) gla_dq_kernel(
    float* __restrict__ dq, bf16* __restrict__ dA_out, const bf16* __restrict__ dout,
    const bf16* __restrict__ k, const bf16* __restrict__ v, const float* __restrict__ g,
    const bf16* __restrict__ ckpt, int N, int H) {
  using Sh = Shapes<DK, DV>;
  constexpr int LK = Sh::LK, LV = Sh::LV, LC = Sh::LC, FK = Sh::FK, FC = Sh::FC;
  extern __shared__ __align__(128) char smem[];
  char* p = smem;
  bf16* dos = reinterpret_cast<bf16*>(p);
  bf16* vs = reinterpret_cast<bf16*>(p + Sh::bv);
  float* T = reinterpret_cast<float*>(p);  // after dO, V are dead
  p += Sh::r_dov;
  bf16* ks = reinterpret_cast<bf16*>(p);
  p += Sh::bk;
  float* b = reinterpret_cast<float*>(p);
  p += Sh::fk;
  bf16* Ss = reinterpret_cast<bf16*>(p);
  bf16* kt = reinterpret_cast<bf16*>(p);  // after S is dead
  p += Sh::r_s;
  float* dAf = reinterpret_cast<float*>(p);
  p += Sh::fc;
  bf16* dAb = reinterpret_cast<bf16*>(p);
  p += Sh::bc;
  float* acc = reinterpret_cast<float*>(p);
  p += Sh::fk;
  float* tot = reinterpret_cast<float*>(p);

  const int c = blockIdx.x, h = blockIdx.y, NC = gridDim.x, n0 = c * kC;
  const int L = min(kC, N - n0);
  const long row0 = (long)n0 * H + h;
  load_rows<bf16, DV>(dos, LV, dout + row0 * DV, (long)H * DV, kC, L);
  load_rows<bf16, DV>(vs, LV, v + row0 * DV, (long)H * DV, kC, L);
  load_rows<bf16, DK>(ks, LK, k + row0 * DK, (long)H * DK, kC, L);
  load_rows<bf16, DV>(Ss, LV, ckpt + ((long)h * NC + c) * DK * DV, DV, DK, DK);
  if (g) load_rows<float, DK>(b, FK, g + row0 * DK, (long)H * DK, kC, L);
  else
    for (int idx = threadIdx.x; idx < kC * DK; idx += kThreads) b[(idx / DK) * FK + idx % DK] = 0.0f;
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  chunk_scan<DK, false>(b, FK, tot);
  block_mma<false, true>(dAf, FC, dos, LV, vs, LV, kC, kC, DV, false);
  block_mma<false, true>(acc, FK, dos, LV, Ss, LV, kC, DK, DV, false);
  __syncthreads();
  bf16* dAg = dA_out + ((long)h * NC + c) * kC * kC;
  for (int idx = threadIdx.x; idx < kC * kC; idx += kThreads) {
    const int i = idx / kC, m = idx % kC;
    // The bf16 value everywhere (also in the exact diagonal blocks): kernel 5 reads this bf16
    // dA, and dg = Σ (q⊙dq − k⊙dk) relies on the pair (i, m) entering dq_i and dk_m with the
    // same value (the i = m terms cancel exactly; a mismatch would not).
    const bf16 x = __float2bfloat16(m <= i ? dAf[i * FC + m] : 0.0f);
    dAf[i * FC + m] = __bfloat162float(x);
    dAb[i * LC + m] = x;
    dAg[idx] = x;
  }
  for (int idx = threadIdx.x; idx < kC * DK; idx += kThreads) {
    const int i = idx / DK, d = idx % DK;
    acc[i * FK + d] *= __expf(b[i * FK + d]);
    const float km = bf(ks[i * LK + d]), bm = b[i * FK + d];
    for (int I = i / 16 + 1; I < 4; ++I)
      kt[(ksec(I) + i) * LK + d] = __float2bfloat16(km * __expf(b[16 * I * FK + d] - bm));
  }
  __syncthreads();
  // T[I rows] = dA[I rows, 0:16I] · k̃^{(I)} for I = 1..3.
  {
    const int warp = threadIdx.x / 32, tn = DK / 16;
    for (int t = warp; t < 3 * tn; t += kThreads / 32) {
      const int I = 1 + t / tn, nt = t % tn;
      mma_tile<false, false>(T + I * 16 * FK + nt * 16, FK, dAb + I * 16 * LC, LC,
                             kt + ksec(I) * LK + nt * 16, LK, 16 * I, false);
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < L * DK; idx += kThreads) {
    const int i = idx / DK, d = idx % DK, I0 = (i / 16) * 16;
    const float bi = b[i * FK + d];
    float x = acc[i * FK + d];
    if (I0 > 0) x += __expf(bi - b[I0 * FK + d]) * T[i * FK + d];
    for (int m = I0; m <= i; ++m)
      x += dAf[i * FC + m] * bf(ks[m * LK + d]) * __expf(bi - b[m * FK + d]);
    dq[(row0 + (long)i * H) * DK + d] = x;
  }
}

// ---- kernel 5: dk, dv, dg ---------------------------------------------------------------------
// Grid (chunks, H). dv = Aᵀ dO + k̄ dS; dk = e^{b_last − b} ⊙ (V dSᵀ) + intra;
// dg = reverse cumsum in the chunk of (q ⊙ dq − k ⊙ dk) + Σ_tiles rowdot.
template <int DK, int DV>
__global__ void __launch_bounds__(kThreads) gla_dkv_kernel(
    float* __restrict__ dk, float* __restrict__ dv, float* __restrict__ dg,
    const float* __restrict__ dq, const bf16* __restrict__ dout, const bf16* __restrict__ q,
    const bf16* __restrict__ k, const bf16* __restrict__ v, const float* __restrict__ g,
    const bf16* __restrict__ A, const bf16* __restrict__ dA, const bf16* __restrict__ dckpt,
    const float* __restrict__ rowdot, int N, int H) {
  using Sh = Shapes<DK, DV>;
  constexpr int LK = Sh::LK, LV = Sh::LV, LC = Sh::LC, FK = Sh::FK, FV = Sh::FV;
  extern __shared__ __align__(128) char smem[];
  char* p = smem;
  bf16* qs = reinterpret_cast<bf16*>(p);
  p += Sh::bk;
  bf16* ks = reinterpret_cast<bf16*>(p);
  p += Sh::bk;
  float* b = reinterpret_cast<float*>(p);
  p += Sh::fk;
  bf16* dAs = reinterpret_cast<bf16*>(p);
  p += Sh::bc;
  bf16* dSs = reinterpret_cast<bf16*>(p);
  bf16* qh = reinterpret_cast<bf16*>(p);  // after dS is dead
  p += Sh::r_s;
  float* X = reinterpret_cast<float*>(p);
  p += Sh::r_x;
  bf16* dos = reinterpret_cast<bf16*>(p);
  bf16* As = reinterpret_cast<bf16*>(p + Sh::bv);
  bf16* kb = reinterpret_cast<bf16*>(p + Sh::bv + Sh::bc);
  float* T = reinterpret_cast<float*>(p);  // after dO, A, k̄ are dead
  p += Sh::r_3;
  bf16* vs = reinterpret_cast<bf16*>(p);
  p += Sh::bv;
  float* tot = reinterpret_cast<float*>(p);

  const int c = blockIdx.x, h = blockIdx.y, NC = gridDim.x, n0 = c * kC;
  const int L = min(kC, N - n0);
  const long row0 = (long)n0 * H + h;
  const long hc = (long)h * NC + c;
  load_rows<bf16, DK>(qs, LK, q + row0 * DK, (long)H * DK, kC, L);
  load_rows<bf16, DK>(ks, LK, k + row0 * DK, (long)H * DK, kC, L);
  load_rows<bf16, kC>(dAs, LC, dA + hc * kC * kC, kC, kC, kC);
  load_rows<bf16, DV>(dSs, LV, dckpt + hc * DK * DV, DV, DK, DK);
  load_rows<bf16, DV>(dos, LV, dout + row0 * DV, (long)H * DV, kC, L);
  load_rows<bf16, kC>(As, LC, A + hc * kC * kC, kC, kC, kC);
  load_rows<bf16, DV>(vs, LV, v + row0 * DV, (long)H * DV, kC, L);
  if (g) load_rows<float, DK>(b, FK, g + row0 * DK, (long)H * DK, kC, L);
  else
    for (int idx = threadIdx.x; idx < kC * DK; idx += kThreads) b[(idx / DK) * FK + idx % DK] = 0.0f;
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  chunk_scan<DK, false>(b, FK, tot);
  for (int idx = threadIdx.x; idx < kC * DK; idx += kThreads) {
    const int m = idx / DK, d = idx % DK;
    kb[m * LK + d] =
        __float2bfloat16(bf(ks[m * LK + d]) * __expf(b[(kC - 1) * FK + d] - b[m * FK + d]));
  }
  __syncthreads();
  // dv
  block_mma<true, false>(X, FV, As, LC, dos, LV, kC, DV, kC, false);
  __syncthreads();
  block_mma<false, false>(X, FV, kb, LK, dSs, LV, kC, DV, DK, true);
  __syncthreads();
  for (int idx = threadIdx.x; idx < L * DV; idx += kThreads) {
    const int m = idx / DV, e = idx % DV;
    dv[(row0 + (long)m * H) * DV + e] = X[m * FV + e];
  }
  __syncthreads();
  // dk: inter-chunk part
  block_mma<false, true>(X, FK, vs, LV, dSs, LV, kC, DK, DV, false);
  __syncthreads();
  for (int idx = threadIdx.x; idx < kC * DK; idx += kThreads) {
    const int i = idx / DK, d = idx % DK;
    const float bi = b[i * FK + d];
    X[i * FK + d] *= __expf(b[(kC - 1) * FK + d] - bi);
    const float qi = bf(qs[i * LK + d]);
    for (int J = 0; J < i / 16; ++J)  // rows i ≥ 16(J+1) of section J, reference row 16J+15
      qh[(qsec(J) + i - 16 * (J + 1)) * LK + d] =
          __float2bfloat16(qi * __expf(bi - b[(16 * J + 15) * FK + d]));
  }
  __syncthreads();
  // T[J rows] = dA[16(J+1):64, J cols]ᵀ · q̂^{(J)} for J = 0..2.
  {
    const int warp = threadIdx.x / 32, tn = DK / 16;
    for (int t = warp; t < 3 * tn; t += kThreads / 32) {
      const int J = t / tn, nt = t % tn;
      mma_tile<true, false>(T + J * 16 * FK + nt * 16, FK, dAs + (J + 1) * 16 * LC + J * 16, LC,
                            qh + qsec(J) * LK + nt * 16, LK, 16 * (3 - J), false);
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < kC * DK; idx += kThreads) {
    const int m = idx / DK, d = idx % DK, J = m / 16, end = J * 16 + 15;
    const float bm = b[m * FK + d];
    float x = X[m * FK + d];
    if (J < 3) x += __expf(b[end * FK + d] - bm) * T[m * FK + d];
    for (int i = m; i <= end; ++i)
      x += bf(dAs[i * LC + m]) * bf(qs[i * LK + d]) * __expf(b[i * FK + d] - bm);
    float contrib = 0.0f;
    if (m < L) {
      const long r = (row0 + (long)m * H) * DK + d;
      dk[r] = x;
      contrib = bf(qs[m * LK + d]) * dq[r] - bf(ks[m * LK + d]) * x;
    }
    X[m * FK + d] = contrib;
  }
  if (!g || !dg) return;  // uniform across the block
  __syncthreads();
  chunk_scan<DK, true>(X, FK, tot);
  for (int idx = threadIdx.x; idx < L * DK; idx += kThreads) {
    const int m = idx / DK, d = idx % DK;
    float x = X[m * FK + d];
#pragma unroll
    for (int t = 0; t < DV / kTV; ++t) x += rowdot[(hc * (DV / kTV) + t) * DK + d];
    dg[(row0 + (long)m * H) * DK + d] = x;
  }
}

// ---- recurrent --------------------------------------------------------------------------------
// Grid (DV/32, H), 256 threads: column e0 + tid % 32, rows tid / 32 + 8j held in registers.
template <int DK, int DV>
__global__ void __launch_bounds__(256) gla_recurrent_kernel(
    bf16* __restrict__ o, float* __restrict__ state, const bf16* __restrict__ q,
    const bf16* __restrict__ k, const bf16* __restrict__ v, const float* __restrict__ g, int N,
    int H) {
  constexpr int R = DK / 8;
  __shared__ float qs[DK], ks[DK], as[DK], vs[32], red[8][32];
  const int h = blockIdx.y, e = threadIdx.x % 32, r = threadIdx.x / 32, e0 = blockIdx.x * 32;
  float s[R];
#pragma unroll
  for (int j = 0; j < R; ++j) s[j] = state[((long)h * DK + r + 8 * j) * DV + e0 + e];
  for (int n = 0; n < N; ++n) {
    const long row = (long)n * H + h;
    __syncthreads();
    for (int d = threadIdx.x; d < DK; d += 256) {
      qs[d] = bf(q[row * DK + d]);
      ks[d] = bf(k[row * DK + d]);
      as[d] = g ? __expf(g[row * DK + d]) : 1.0f;
    }
    if (threadIdx.x < 32) vs[threadIdx.x] = bf(v[row * DV + e0 + threadIdx.x]);
    __syncthreads();
    float part = 0.0f;
#pragma unroll
    for (int j = 0; j < R; ++j) {
      const int d = r + 8 * j;
      s[j] = as[d] * s[j] + ks[d] * vs[e];
      part += qs[d] * s[j];
    }
    red[r][e] = part;
    __syncthreads();
    if (r == 0) {
      float x = 0.0f;
#pragma unroll
      for (int t = 0; t < 8; ++t) x += red[t][e];
      o[row * DV + e0 + e] = __float2bfloat16(x);
    }
  }
#pragma unroll
  for (int j = 0; j < R; ++j) state[((long)h * DK + r + 8 * j) * DV + e0 + e] = s[j];
}

// Calls f(DK, DV) as integral constants for supported head dims.
template <class F>
Status dispatch_dims(int Dk, int Dv, F&& f) {
  return dispatch_head_dim(Dk, [&](auto dk) {
    return dispatch_head_dim(Dv, [&](auto dv) { return f(dk, dv); });
  });
}

template <class K>
Status set_smem(K kernel, size_t bytes) {
  GL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)bytes));
  return ok_status();
}

// Records ev[i] on the stream when timing (ev non-null).
Status mark(cudaEvent_t* ev, int i, cudaStream_t stream) {
  if (ev) GL_CUDA_CHECK(cudaEventRecord(ev[i], stream));
  return ok_status();
}

// Kernels 1 and 2 (the forward's prepare and state pass) into the workspace; ev[1], ev[2] after
// each when timing.
template <int DK, int DV>
Status forward_states(const Ws& ws, float* state_final, const float* state_init, const bf16* q,
                      const bf16* k, const bf16* v, const float* g, int N, int H,
                      cudaStream_t stream, cudaEvent_t* ev = nullptr) {
  using Sh = Shapes<DK, DV>;
  const int NC = (N + kC - 1) / kC;
  GL_TRY(set_smem(gla_prepare_kernel<DK, DV>, Sh::prep));
  gla_prepare_kernel<DK, DV><<<dim3(NC, H), kThreads, Sh::prep, stream>>>(
      ws.qbar, ws.kbar, ws.decay, ws.A, q, k, g, N, H);
  GL_CUDA_CHECK_LAUNCH();
  GL_TRY(mark(ev, 1, stream));
  GL_TRY(set_smem(gla_state_pass_kernel<DK, DV, false>, Sh::pass));
  gla_state_pass_kernel<DK, DV, false><<<dim3(DV / kTV, DK / 64, H), kPassThreads, Sh::pass, stream>>>(
      ws.ckpt, state_final, state_init, ws.kbar, v, ws.decay, nullptr, nullptr, N, H);
  GL_CUDA_CHECK_LAUNCH();
  GL_TRY(mark(ev, 2, stream));
  return ok_status();
}

Status check_args(int N, int H, void* workspace, size_t have, size_t need) {
  if (N < 0 || H < 1) return make_error("gated_linear: bad shape N=", N, " H=", H);
  if (N > 0 && (workspace == nullptr || have < need))
    return make_error("gated_linear: workspace of ", have, " bytes, need ", need);
  return ok_status();
}

}  // namespace

size_t gated_linear_forward_workspace_bytes(int N, int H, int Dk, int Dv) {
  return carve(nullptr, N, H, Dk, Dv, false, nullptr);
}

size_t gated_linear_backward_workspace_bytes(int N, int H, int Dk, int Dv) {
  return carve(nullptr, N, H, Dk, Dv, true, nullptr);
}

Status gated_linear_chunked_forward(bf16* o, float* state_final, const float* state_init,
                                    const bf16* q, const bf16* k, const bf16* v, const float* g,
                                    int N, int H, int Dk, int Dv, void* workspace,
                                    size_t workspace_bytes, cudaStream_t stream) {
  return dispatch_dims(Dk, Dv, [&](auto dk, auto dv) -> Status {
    constexpr int DK = decltype(dk)::value, DV = decltype(dv)::value;
    using Sh = Shapes<DK, DV>;
    GL_TRY(check_args(N, H, workspace, workspace_bytes,
                      gated_linear_forward_workspace_bytes(N, H, DK, DV)));
    if (N == 0) {
      if (state_final) {
        const size_t bytes = (size_t)H * DK * DV * sizeof(float);
        if (state_init)
          GL_CUDA_CHECK(cudaMemcpyAsync(state_final, state_init, bytes, cudaMemcpyDeviceToDevice, stream));
        else
          GL_CUDA_CHECK(cudaMemsetAsync(state_final, 0, bytes, stream));
      }
      return ok_status();
    }
    Ws ws;
    carve(static_cast<char*>(workspace), N, H, DK, DV, false, &ws);
    GL_TRY((forward_states<DK, DV>(ws, state_final, state_init, q, k, v, g, N, H, stream)));
    const int NC = (N + kC - 1) / kC;
    GL_TRY(set_smem(gla_output_kernel<DK, DV>, Sh::out));
    gla_output_kernel<DK, DV><<<dim3(NC, H), kThreads, Sh::out, stream>>>(o, ws.qbar, ws.ckpt, ws.A,
                                                                          v, N, H);
    GL_CUDA_CHECK_LAUNCH();
    return ok_status();
  });
}

Status gated_linear_recurrent_forward(bf16* o, float* state, const bf16* q, const bf16* k,
                                      const bf16* v, const float* g, int N, int H, int Dk, int Dv,
                                      cudaStream_t stream) {
  return dispatch_dims(Dk, Dv, [&](auto dk, auto dv) -> Status {
    constexpr int DK = decltype(dk)::value, DV = decltype(dv)::value;
    if (N < 0 || H < 1) return make_error("gated_linear: bad shape N=", N, " H=", H);
    if (N == 0) return ok_status();
    gla_recurrent_kernel<DK, DV><<<dim3(DV / 32, H), 256, 0, stream>>>(o, state, q, k, v, g, N, H);
    GL_CUDA_CHECK_LAUNCH();
    return ok_status();
  });
}

namespace {

// The backward; with ev (6 events) it records ev[0] before the first kernel and ev[i] after
// kernel i.
Status backward_impl(float* dq, float* dk, float* dv, float* dg, const bf16* dout, const bf16* q,
                     const bf16* k, const bf16* v, const float* g, int N, int H, int Dk, int Dv,
                     void* workspace, size_t workspace_bytes, cudaStream_t stream,
                     cudaEvent_t* ev) {
  return dispatch_dims(Dk, Dv, [&](auto dkc, auto dvc) -> Status {
    constexpr int DK = decltype(dkc)::value, DV = decltype(dvc)::value;
    using Sh = Shapes<DK, DV>;
    GL_TRY(check_args(N, H, workspace, workspace_bytes,
                      gated_linear_backward_workspace_bytes(N, H, DK, DV)));
    if (N == 0) return ok_status();
    Ws ws;
    carve(static_cast<char*>(workspace), N, H, DK, DV, true, &ws);
    GL_TRY(mark(ev, 0, stream));
    GL_TRY((forward_states<DK, DV>(ws, nullptr, nullptr, q, k, v, g, N, H, stream, ev)));
    const int NC = (N + kC - 1) / kC;
    GL_TRY(set_smem(gla_state_pass_kernel<DK, DV, true>, Sh::pass));
    gla_state_pass_kernel<DK, DV, true><<<dim3(DV / kTV, DK / 64, H), kPassThreads, Sh::pass, stream>>>(
        ws.dckpt, nullptr, nullptr, ws.qbar, dout, ws.decay, ws.ckpt, ws.rowdot, N, H);
    GL_CUDA_CHECK_LAUNCH();
    GL_TRY(mark(ev, 3, stream));
    GL_TRY(set_smem(gla_dq_kernel<DK, DV>, Sh::dq));
    gla_dq_kernel<DK, DV><<<dim3(NC, H), kThreads, Sh::dq, stream>>>(dq, ws.dA, dout, k, v, g,
                                                                     ws.ckpt, N, H);
    GL_CUDA_CHECK_LAUNCH();
    GL_TRY(mark(ev, 4, stream));
    GL_TRY(set_smem(gla_dkv_kernel<DK, DV>, Sh::dkv));
    gla_dkv_kernel<DK, DV><<<dim3(NC, H), kThreads, Sh::dkv, stream>>>(
        dk, dv, g ? dg : nullptr, dq, dout, q, k, v, g, ws.A, ws.dA, ws.dckpt, ws.rowdot, N, H);
    GL_CUDA_CHECK_LAUNCH();
    GL_TRY(mark(ev, 5, stream));
    return ok_status();
  });
}

}  // namespace

Status gated_linear_backward(float* dq, float* dk, float* dv, float* dg, const bf16* dout,
                             const bf16* q, const bf16* k, const bf16* v, const float* g, int N,
                             int H, int Dk, int Dv, void* workspace, size_t workspace_bytes,
                             cudaStream_t stream) {
  return backward_impl(dq, dk, dv, dg, dout, q, k, v, g, N, H, Dk, Dv, workspace,
                       workspace_bytes, stream, nullptr);
}

Status gated_linear_backward_stage_ms(float ms[5], float* dq, float* dk, float* dv, float* dg,
                                      const bf16* dout, const bf16* q, const bf16* k,
                                      const bf16* v, const float* g, int N, int H, int Dk, int Dv,
                                      void* workspace, size_t workspace_bytes,
                                      cudaStream_t stream) {
  cudaEvent_t ev[6] = {};
  auto timed = [&]() -> Status {
    for (auto& e : ev) GL_CUDA_CHECK(cudaEventCreate(&e));
    GL_TRY(backward_impl(dq, dk, dv, dg, dout, q, k, v, g, N, H, Dk, Dv, workspace,
                         workspace_bytes, stream, ev));
    GL_CUDA_CHECK(cudaEventSynchronize(ev[5]));
    for (int i = 0; i < 5; ++i) GL_CUDA_CHECK(cudaEventElapsedTime(&ms[i], ev[i], ev[i + 1]));
    return ok_status();
  };
  Status st = timed();
  for (auto& e : ev)
    if (e) cudaEventDestroy(e);
  return st;
}

}  // namespace golinear::kernels::cuda
