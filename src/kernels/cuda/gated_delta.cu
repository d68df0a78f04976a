// Gated DeltaNet on the GPU (see gated_delta.h for the math and the two-kernel chunked scheme).
// Tensor-core tiles are wmma m16n16k16 (bf16 operands, fp32 accumulators) read from shared
// memory; every shared-memory row is padded by 16 bytes against bank conflicts.
#include "kernels/cuda/gated_delta.h"

#include <mma.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/device_utils.cuh"

namespace golinear::kernels::cuda {

namespace {

using namespace nvcuda;
using device::cp_async16;
using device::cp_async_commit;
using device::cp_async_wait;

constexpr int kChunk = kGatedDeltaChunk;  // 64
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragAT = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBT = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

size_t align_up(size_t x) { return (x + 255) / 256 * 256; }

// Where the chunked forward's scratch lives inside the workspace.
struct ForwardWorkspace {
  bf16* W;           // (H, NC, 64, D)
  bf16* U;           // (H, NC, 64, D)
  bf16* P;           // (H, NC, 64, 64)
  float* gamma;      // (H, NC, 64)
  size_t bytes;
};
ForwardWorkspace forward_workspace(void* base, int N, int H, int D) {
  const size_t NC = (N + kChunk - 1) / kChunk;
  char* p = static_cast<char*>(base);
  ForwardWorkspace w{};
  size_t off = 0;
  w.W = reinterpret_cast<bf16*>(p + off), off += align_up(H * NC * kChunk * D * sizeof(bf16));
  w.U = reinterpret_cast<bf16*>(p + off), off += align_up(H * NC * kChunk * D * sizeof(bf16));
  w.P = reinterpret_cast<bf16*>(p + off), off += align_up(H * NC * kChunk * kChunk * sizeof(bf16));
  w.gamma = reinterpret_cast<float*>(p + off), off += align_up(H * NC * kChunk * sizeof(float));
  w.bytes = off;
  return w;
}

// ---- kernel 1: chunk-local preparation ------------------------------------------------------

template <int D>
struct PrepareLayout {
  static constexpr int LDB = D + 8;   // bf16 rows of D
  static constexpr int LDF = 64 + 4;  // fp32 rows of 64
  static constexpr int LDT = 64 + 8;  // bf16 rows of 64
  static constexpr int LDS = D + 4;   // fp32 rows of D (output staging, aliases f1 and f2)
  static constexpr size_t k = 0;
  static constexpr size_t q = k + 64 * LDB * 2;
  static constexpr size_t v = q + 64 * LDB * 2;
  static constexpr size_t f1 = v + 64 * LDB * 2;
  static constexpr size_t f2 = f1 + 64 * LDF * 4;
  static constexpr size_t stage = f1;
  static constexpr size_t tb = f2 + 64 * LDF * 4;
  static constexpr size_t gam = tb + 64 * LDT * 2;
  static constexpr size_t bet = gam + 64 * 4;
  static constexpr size_t total = bet + 64 * 4;
  static_assert(64 * LDS * 4 <= 2 * 64 * LDF * 4, "staging must fit in f1 + f2");
};

// grid (NC, H), kPrepareThreads threads. Writes W, U (64, D), P (64, 64) and γ (64) of chunk c, head h.
constexpr int kPrepareThreads = 256;

template <int D>
__global__ void __launch_bounds__(kPrepareThreads) gdn_prepare_kernel(bf16* __restrict__ W_out,
                                                          bf16* __restrict__ U_out,
                                                          bf16* __restrict__ P_out,
                                                          float* __restrict__ gamma_out,
                                                          const bf16* __restrict__ q,
                                                          const bf16* __restrict__ k,
                                                          const bf16* __restrict__ v,
                                                          const float* __restrict__ g,
                                                          const float* __restrict__ beta, int N,
                                                          int H, int G) {
  using L = PrepareLayout<D>;
  constexpr int LDB = L::LDB, LDF = L::LDF, LDT = L::LDT, LDS = L::LDS;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* Ks = reinterpret_cast<bf16*>(smem + L::k);
  bf16* Qs = reinterpret_cast<bf16*>(smem + L::q);
  bf16* Vs = reinterpret_cast<bf16*>(smem + L::v);
  float* F1 = reinterpret_cast<float*>(smem + L::f1);
  float* F2 = reinterpret_cast<float*>(smem + L::f2);
  float* Stage = reinterpret_cast<float*>(smem + L::stage);
  bf16* Tb = reinterpret_cast<bf16*>(smem + L::tb);
  float* gam = reinterpret_cast<float*>(smem + L::gam);
  float* bet = reinterpret_cast<float*>(smem + L::bet);

  const int c = blockIdx.x, h = blockIdx.y, NC = gridDim.x;
  const int c0 = c * kChunk, hk = h / (H / G);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  constexpr int VPR = D / 8;  // 16-byte vectors per row

  // Every row copy in flight at once (cp.async, zero-filled past the end of the sequence).
#pragma unroll
  for (int it = 0; it < 64 * VPR / kPrepareThreads; ++it) {
    const int idx = tid + it * kPrepareThreads;
    const int r = idx / VPR, cv = idx % VPR, n = c0 + r;
    const bool valid = n < N;
    cp_async16(Qs + r * LDB + cv * 8, valid ? q + ((size_t)n * H + h) * D + cv * 8 : q, valid);
    cp_async16(Ks + r * LDB + cv * 8, valid ? k + ((size_t)n * G + hk) * D + cv * 8 : k, valid);
    cp_async16(Vs + r * LDB + cv * 8, valid ? v + ((size_t)n * G + hk) * D + cv * 8 : v, valid);
  }
  cp_async_commit();
  if (tid < 64) {
    const int n = c0 + tid;
    gam[tid] = n < N ? g[(size_t)n * H + h] : 0.0f;  // padded rows: no decay, no update
    bet[tid] = n < N ? beta[(size_t)n * H + h] : 0.0f;
  }
  cp_async_wait<0>();
  __syncthreads();

  if (warp == 0) {  // γ = inclusive cumulative sum of g over the chunk
    const float a = gam[2 * lane], b = gam[2 * lane + 1];
    float s = a + b;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const float t = __shfl_up_sync(0xffffffffu, s, off);
      if (lane >= off) s += t;
    }
    const float before = s - (a + b);
    gam[2 * lane] = before + a;
    gam[2 * lane + 1] = before + a + b;
  }
  // Lower 16×16 tiles (j ≤ i) of K Kᵀ into F1 and Q Kᵀ into F2: 10 + 10 tiles.
  for (int t = warp; t < 20; t += kPrepareThreads / 32) {
    const bf16* X = t < 10 ? Ks : Qs;
    const int tt = t % 10;
    const int i = (tt >= 1) + (tt >= 3) + (tt >= 6), j = tt - i * (i + 1) / 2;
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      FragA a;
      FragBT b;
      wmma::load_matrix_sync(a, X + i * 16 * LDB + kk * 16, LDB);
      wmma::load_matrix_sync(b, Ks + j * 16 * LDB + kk * 16, LDB);
      wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync((t < 10 ? F1 : F2) + i * 16 * LDF + j * 16, acc, LDF,
                            wmma::mem_row_major);
  }
  __syncthreads();

  // A (strictly lower, in F1) and P (lower with diagonal, straight to global).
  bf16* P_chunk = P_out + ((size_t)h * NC + c) * 64 * 64;
  for (int idx = tid; idx < 64 * 64; idx += kPrepareThreads) {
    const int i = idx / 64, m = idx % 64;
    float a = 0.0f, p = 0.0f;
    if (m <= i) {
      const float decay = expf(gam[i] - gam[m]);
      if (m < i) a = bet[i] * decay * F1[i * LDF + m];
      p = decay * F2[i * LDF + m];
    }
    F1[i * LDF + m] = a;
    P_chunk[idx] = __float2bfloat16(p);
  }
  __syncthreads();

  // Scale K by β e^γ and V by β in place (16-byte vectors).
  for (int idx = tid; idx < 64 * VPR; idx += kPrepareThreads) {
    const int r = idx / VPR, cv = idx % VPR;
    const float bk = bet[r] * expf(gam[r]), bv = bet[r];
    __nv_bfloat162* kp = reinterpret_cast<__nv_bfloat162*>(Ks + r * LDB + cv * 8);
    __nv_bfloat162* vp = reinterpret_cast<__nv_bfloat162*>(Vs + r * LDB + cv * 8);
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const float2 a = __bfloat1622float2(kp[x]), b = __bfloat1622float2(vp[x]);
      kp[x] = __floats2bfloat162_rn(a.x * bk, a.y * bk);
      vp[x] = __floats2bfloat162_rn(b.x * bv, b.y * bv);
    }
  }
  // T = (I + A)⁻¹ (fp32, into F2) by 16 × 16 blocks. Diagonal blocks: warp w inverts block w by
  // forward substitution, lane j < 16 one column, fully unrolled (A reads are broadcasts).
  if (warp < 4 && lane < 16) {
    const int b0 = 16 * warp, j = lane;
    float col[16];
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      float s = r == j ? 1.0f : 0.0f;
#pragma unroll
      for (int m = 0; m < r; ++m) s -= F1[(b0 + r) * LDF + b0 + m] * col[m];
      col[r] = r < j ? 0.0f : s;
    }
#pragma unroll
    for (int r = 0; r < 16; ++r) F2[(b0 + r) * LDF + b0 + j] = col[r];
  }
  // Blocks above the diagonal are zero.
  for (int idx = tid; idx < 64 * 64; idx += kPrepareThreads) {
    const int i = idx / 64, m = idx % 64;
    if (m / 16 > i / 16) F2[i * LDF + m] = 0.0f;
  }
  __syncthreads();
  // Block row bi: T_{bi,bj} = −T_{bi,bi} Σ_{bj ≤ bm < bi} A_{bi,bm} T_{bm,bj}. The partial sums
  // Y go to F1's unused upper blocks (rows 0..15, columns 16..63).
  for (int bi = 1; bi < 4; ++bi) {
    for (int idx = tid; idx < bi * 256; idx += kPrepareThreads) {
      const int bj = idx / 256, r = (idx / 16) % 16, s = idx % 16;
      const float* arow = F1 + (16 * bi + r) * LDF;
      float y = 0.0f;
      for (int m = 16 * bj; m < 16 * bi; ++m) y += arow[m] * F2[m * LDF + 16 * bj + s];
      F1[r * LDF + 16 + 16 * bj + s] = y;
    }
    __syncthreads();
    for (int idx = tid; idx < bi * 256; idx += kPrepareThreads) {
      const int bj = idx / 256, r = (idx / 16) % 16, s = idx % 16;
      const float* trow = F2 + (16 * bi + r) * LDF + 16 * bi;
      float t = 0.0f;
#pragma unroll
      for (int x = 0; x < 16; ++x)
        if (x <= r) t -= trow[x] * F1[x * LDF + 16 + 16 * bj + s];
      F2[(16 * bi + r) * LDF + 16 * bj + s] = t;
    }
    __syncthreads();
  }
  for (int idx = tid; idx < 64 * 64; idx += kPrepareThreads) {
    const int i = idx / 64, m = idx % 64;
    Tb[i * LDT + m] = __float2bfloat16(F2[i * LDF + m]);
  }
  __syncthreads();

  // W = T (βe^γ K), U = T (β V); T is lower triangular, so row tile i needs k tiles ≤ i.
  constexpr int CT = D / 16;
  for (int which = 0; which < 2; ++which) {
    const bf16* B = which == 0 ? Ks : Vs;
    for (int t = warp; t < 4 * CT; t += kPrepareThreads / 32) {
      const int i = t / CT, j = t % CT;
      FragC acc;
      wmma::fill_fragment(acc, 0.0f);
      for (int kk = 0; kk <= i; ++kk) {
        FragA a;
        FragB b;
        wmma::load_matrix_sync(a, Tb + i * 16 * LDT + kk * 16, LDT);
        wmma::load_matrix_sync(b, B + kk * 16 * LDB + j * 16, LDB);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(Stage + i * 16 * LDS + j * 16, acc, LDS, wmma::mem_row_major);
    }
    __syncthreads();
    bf16* out = (which == 0 ? W_out : U_out) + ((size_t)h * NC + c) * 64 * D;
    for (int idx = tid; idx < 64 * VPR; idx += kPrepareThreads) {
      const int r = idx / VPR, cv = idx % VPR;
      const float* s = Stage + r * LDS + cv * 8;
      __nv_bfloat162 packed[4];
#pragma unroll
      for (int x = 0; x < 4; ++x) packed[x] = __floats2bfloat162_rn(s[2 * x], s[2 * x + 1]);
      *reinterpret_cast<uint4*>(out + r * D + cv * 8) = *reinterpret_cast<uint4*>(packed);
    }
    __syncthreads();
  }
  if (tid < 64) gamma_out[((size_t)h * NC + c) * 64 + tid] = gam[tid];
}

// ---- kernel 2: the sequential state pass ----------------------------------------------------
//
// Register-resident state, one warp per 16 value columns. The warp holds Sᵀ (16 value columns ×
// D key rows) as fp32 mma.sync m16n8k16 accumulators; an accumulator pair of n-tiles is exactly
// the A operand of the next product (the FlashAttention-2 P→A trick), so the chain
//   Xᵀ = Sᵀ Wᵀ,  ũᵀ = Uᵀ − Xᵀ,  Sᵀ ← e^{γL} Sᵀ + (ũ e^{γL−γ})ᵀ K
// never leaves registers and needs no barrier between warps: the columns of S evolve
// independently. The output rides along off the chain: Oᵀ = diag-scaled Sᵀ Qᵀ + ũᵀ Pᵀ.
// Per chunk the block stages W, Q, K (64, D), P (64, 64), the U slice and γ with cp.async,
// STAGES deep; one __syncthreads per chunk.

__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const void* p) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

template <int D, int BV>
struct StateLayout {
  static constexpr int NW = BV / 16;              // warps, 16 value columns each
  static constexpr int STAGES = BV <= 64 ? 3 : 2;
  static constexpr int LDB = D + 8, LDP = 64 + 8, LDU = BV + 8, LDO = 16 + 8;
  static constexpr size_t w = 0;
  static constexpr size_t q = w + 64 * LDB * 2;
  static constexpr size_t k = q + 64 * LDB * 2;
  static constexpr size_t p = k + 64 * LDB * 2;
  static constexpr size_t u = p + 64 * LDP * 2;
  static constexpr size_t gm = u + 64 * LDU * 2;
  static constexpr size_t stage_bytes = (gm + 64 * 4 + 127) / 128 * 128;
  static constexpr size_t ostage = STAGES * stage_bytes;  // per warp (64, 16) bf16
  static constexpr size_t total = ostage + NW * 64 * LDO * 2;
};

// grid (D / BV, H), 32·BV/16 threads: head h, value columns [slice·BV, slice·BV + BV).
template <int D, int BV>
__global__ void __launch_bounds__(BV * 2, 1) gdn_state_pass_kernel(
    bf16* __restrict__ o, float* __restrict__ state_final, const float* __restrict__ state_init,
    float* __restrict__ checkpoints, const bf16* __restrict__ q, const bf16* __restrict__ k,
    const bf16* __restrict__ W, const bf16* __restrict__ U, const bf16* __restrict__ P,
    const float* __restrict__ gamma, int N, int H, int G) {
  using L = StateLayout<D, BV>;
  constexpr int LDB = L::LDB, LDP = L::LDP, LDU = L::LDU, LDO = L::LDO, NT = L::NW * 32;
  constexpr int VPR = D / 8, ND = D / 8, KD = D / 16, STAGES = L::STAGES;
  extern __shared__ __align__(128) unsigned char smem[];

  const int slice = blockIdx.x, h = blockIdx.y, col0 = slice * BV;
  const int NC = (N + kChunk - 1) / kChunk, hk = h / (H / G);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int gi = lane / 4, ti = lane % 4;  // mma fragment row / column-pair index
  const int wc = warp * 16;                // this warp's columns inside the slice
  bf16* Os = reinterpret_cast<bf16*>(smem + L::ostage) + warp * 64 * LDO;

  // Sᵀ: n-tile nt holds key rows d = 8nt + 2ti + {0,1}; registers {0,1} value column gi,
  // {2,3} value column gi + 8.
  float S[ND][4];
#pragma unroll
  for (int nt = 0; nt < ND; ++nt)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int d = 8 * nt + 2 * ti + (r & 1), e = col0 + wc + gi + 8 * (r >> 1);
      S[nt][r] = state_init ? state_init[((size_t)h * D + d) * D + e] : 0.0f;
    }

  auto load_stage = [&](int c, int st) {
    unsigned char* base = smem + st * L::stage_bytes;
    bf16* Ws = reinterpret_cast<bf16*>(base + L::w);
    bf16* Qs = reinterpret_cast<bf16*>(base + L::q);
    bf16* Ks = reinterpret_cast<bf16*>(base + L::k);
    bf16* Ps = reinterpret_cast<bf16*>(base + L::p);
    bf16* Us = reinterpret_cast<bf16*>(base + L::u);
    float* gs = reinterpret_cast<float*>(base + L::gm);
    const int c0 = c * kChunk;
    const size_t chunk_row = ((size_t)h * NC + c) * 64;
    for (int idx = tid; idx < 64 * VPR; idx += NT) {
      const int r = idx / VPR, cv = idx % VPR, n = c0 + r;
      const bool valid = n < N;
      cp_async16(Ws + r * LDB + cv * 8, W + (chunk_row + r) * D + cv * 8, true);
      cp_async16(Qs + r * LDB + cv * 8, valid ? q + ((size_t)n * H + h) * D + cv * 8 : q, valid);
      cp_async16(Ks + r * LDB + cv * 8, valid ? k + ((size_t)n * G + hk) * D + cv * 8 : k, valid);
    }
    for (int idx = tid; idx < 64 * 8; idx += NT) {
      const int r = idx / 8, cv = idx % 8;
      cp_async16(Ps + r * LDP + cv * 8, P + (chunk_row + r) * 64 + cv * 8, true);
    }
    for (int idx = tid; idx < 64 * (BV / 8); idx += NT) {
      const int r = idx / (BV / 8), cv = idx % (BV / 8);
      cp_async16(Us + r * LDU + cv * 8, U + (chunk_row + r) * D + col0 + cv * 8, true);
    }
    for (int idx = tid; idx < 16; idx += NT) cp_async16(gs + idx * 4, gamma + chunk_row + idx * 4, true);
  };

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < NC) load_stage(s, s);
    cp_async_commit();
  }
  // ldmatrix lane addressing: matrix mi = lane / 8, row lr = lane % 8.
  const int mi = lane / 8, lr = lane % 8;
  for (int c = 0; c < NC; ++c) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // chunk c visible to all; every warp is done with chunk c − 1's stage
    if (c + STAGES - 1 < NC) load_stage(c + STAGES - 1, (c + STAGES - 1) % STAGES);
    cp_async_commit();
    unsigned char* base = smem + (c % STAGES) * L::stage_bytes;
    const bf16* Ws = reinterpret_cast<const bf16*>(base + L::w);
    const bf16* Qs = reinterpret_cast<const bf16*>(base + L::q);
    const bf16* Ks = reinterpret_cast<const bf16*>(base + L::k);
    const bf16* Ps = reinterpret_cast<const bf16*>(base + L::p);
    const bf16* Us = reinterpret_cast<const bf16*>(base + L::u);
    const float* gs = reinterpret_cast<const float*>(base + L::gm);

    if (checkpoints) {
      float* cp = checkpoints + ((size_t)h * NC + c) * D * D;
#pragma unroll
      for (int nt = 0; nt < ND; ++nt)
#pragma unroll
        for (int r = 0; r < 4; ++r)
          cp[(size_t)(8 * nt + 2 * ti + (r & 1)) * D + col0 + wc + gi + 8 * (r >> 1)] = S[nt][r];
    }

    // Xᵀ = Sᵀ Wᵀ and Yᵀ = Sᵀ Qᵀ (16 × 64 each), k over the D key rows.
    float X[8][4], Y[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int r = 0; r < 4; ++r) X[nt][r] = Y[nt][r] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) {
      uint32_t a[4] = {pack_bf16(S[2 * kk][0], S[2 * kk][1]), pack_bf16(S[2 * kk][2], S[2 * kk][3]),
                       pack_bf16(S[2 * kk + 1][0], S[2 * kk + 1][1]),
                       pack_bf16(S[2 * kk + 1][2], S[2 * kk + 1][3])};
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        // matrices: (n-tile 2np, d lo), (2np, d hi), (2np + 1, lo), (2np + 1, hi)
        const int row = 16 * np + 8 * (mi >> 1) + lr, colk = 16 * kk + 8 * (mi & 1);
        uint32_t bw[4], bq[4];
        ldsm_x4(bw, Ws + row * LDB + colk);
        ldsm_x4(bq, Qs + row * LDB + colk);
        mma16816(X[2 * np], a, bw[0], bw[1]);
        mma16816(X[2 * np + 1], a, bw[2], bw[3]);
        mma16816(Y[2 * np], a, bq[0], bq[1]);
        mma16816(Y[2 * np + 1], a, bq[2], bq[3]);
      }
    }
    const float gl = gs[63], decay_last = expf(gl);
    // ũᵀ = Uᵀ − Xᵀ (into X); Yᵀ column i scaled by e^{γ_i}.
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int m0 = 8 * nt + 2 * ti;
      const float e0 = expf(gs[m0]), e1 = expf(gs[m0 + 1]);
      Y[nt][0] *= e0, Y[nt][1] *= e1, Y[nt][2] *= e0, Y[nt][3] *= e1;
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int m = m0 + (r & 1), e = wc + gi + 8 * (r >> 1);
        X[nt][r] = __bfloat162float(Us[m * LDU + e]) - X[nt][r];
      }
    }
    // A operands: ũᵀ (for P) and (ũ e^{γL−γ})ᵀ (for the state update), k over m.
    uint32_t ua[4][4], ud[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const int m0 = 16 * kk + 2 * ti;
      const float d0 = expf(gl - gs[m0]), d1 = expf(gl - gs[m0 + 1]);
      const float d8 = expf(gl - gs[m0 + 8]), d9 = expf(gl - gs[m0 + 9]);
      const float* x0 = X[2 * kk];
      const float* x1 = X[2 * kk + 1];
      ua[kk][0] = pack_bf16(x0[0], x0[1]);
      ua[kk][1] = pack_bf16(x0[2], x0[3]);
      ua[kk][2] = pack_bf16(x1[0], x1[1]);
      ua[kk][3] = pack_bf16(x1[2], x1[3]);
      ud[kk][0] = pack_bf16(x0[0] * d0, x0[1] * d1);
      ud[kk][1] = pack_bf16(x0[2] * d0, x0[3] * d1);
      ud[kk][2] = pack_bf16(x1[0] * d8, x1[1] * d9);
      ud[kk][3] = pack_bf16(x1[2] * d8, x1[3] * d9);
    }
    // Oᵀ = Yᵀ + ũᵀ Pᵀ (P lower triangular: m ≤ i).
#pragma unroll
    for (int np = 0; np < 4; ++np) {
#pragma unroll
      for (int kk = 0; kk <= np; ++kk) {
        const int row = 16 * np + 8 * (mi >> 1) + lr, colk = 16 * kk + 8 * (mi & 1);
        uint32_t bp[4];
        ldsm_x4(bp, Ps + row * LDP + colk);
        mma16816(Y[2 * np], ua[kk], bp[0], bp[1]);
        mma16816(Y[2 * np + 1], ua[kk], bp[2], bp[3]);
      }
    }
    // Sᵀ ← e^{γL} Sᵀ + (ũ e^{γL−γ})ᵀ K.
#pragma unroll
    for (int nt = 0; nt < ND; ++nt)
#pragma unroll
      for (int r = 0; r < 4; ++r) S[nt][r] *= decay_last;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
      for (int np = 0; np < ND / 2; ++np) {
        // trans matrices: (m lo, d-tile 2np), (m hi, 2np), (m lo, 2np + 1), (m hi, 2np + 1)
        const int row = 16 * kk + 8 * (mi & 1) + lr, cold = 16 * np + 8 * (mi >> 1);
        uint32_t bk[4];
        ldsm_x4_trans(bk, Ks + row * LDB + cold);
        mma16816(S[2 * np], ud[kk], bk[0], bk[1]);
        mma16816(S[2 * np + 1], ud[kk], bk[2], bk[3]);
      }
    }
    // Output: Oᵀ (16 columns × 64 tokens) through this warp's staging tile to global.
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int i = 8 * nt + 2 * ti;
      Os[i * LDO + gi] = __float2bfloat16(Y[nt][0]);
      Os[(i + 1) * LDO + gi] = __float2bfloat16(Y[nt][1]);
      Os[i * LDO + gi + 8] = __float2bfloat16(Y[nt][2]);
      Os[(i + 1) * LDO + gi + 8] = __float2bfloat16(Y[nt][3]);
    }
    __syncwarp();
    const int c0 = c * kChunk;
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const int idx = lane + 32 * x, r = idx / 2, half = idx % 2, n = c0 + r;
      if (n < N)
        *reinterpret_cast<uint4*>(o + ((size_t)n * H + h) * D + col0 + wc + 8 * half) =
            *reinterpret_cast<const uint4*>(Os + r * LDO + 8 * half);
    }
    __syncwarp();
  }
  if (state_final) {
#pragma unroll
    for (int nt = 0; nt < ND; ++nt)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        state_final[((size_t)h * D + 8 * nt + 2 * ti + (r & 1)) * D + col0 + wc + gi + 8 * (r >> 1)] =
            S[nt][r];
  }
}

template <int D, int BV>
Status launch_state_pass(bf16* o, float* state_final, const float* state_init, float* checkpoints,
                         const bf16* q, const bf16* k, const ForwardWorkspace& ws, int N, int H,
                         int G, cudaStream_t stream) {
  using L = StateLayout<D, BV>;
  auto kernel = gdn_state_pass_kernel<D, BV>;
  GL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)L::total));
  kernel<<<dim3(D / BV, H), L::NW * 32, L::total, stream>>>(
      o, state_final, state_init, checkpoints, q, k, ws.W, ws.U, ws.P, ws.gamma, N, H, G);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

template <int D>
Status chunked_forward(bf16* o, float* state_final, const float* state_init, const bf16* q,
                       const bf16* k, const bf16* v, const float* g, const float* beta, int N,
                       int H, int G, const ForwardWorkspace& ws, cudaStream_t stream,
                       float* checkpoints, int value_block) {
  const int NC = (N + kChunk - 1) / kChunk;
  using L = PrepareLayout<D>;
  auto prepare = gdn_prepare_kernel<D>;
  GL_CUDA_CHECK(cudaFuncSetAttribute(prepare, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)L::total));
  prepare<<<dim3(NC, H), kPrepareThreads, L::total, stream>>>(ws.W, ws.U, ws.P, ws.gamma, q, k, v, g, beta,
                                                  N, H, G);
  GL_CUDA_CHECK_LAUNCH();
  switch (value_block == 0 ? (D == 128 ? 64 : 32) : value_block) {
    case 16:
      return launch_state_pass<D, 16>(o, state_final, state_init, checkpoints, q, k, ws, N, H, G, stream);
    case 32:
      return launch_state_pass<D, 32>(o, state_final, state_init, checkpoints, q, k, ws, N, H, G, stream);
    case 64:
      return launch_state_pass<D, 64>(o, state_final, state_init, checkpoints, q, k, ws, N, H, G, stream);
    case 128:
      if constexpr (D == 128)
        return launch_state_pass<D, 128>(o, state_final, state_init, checkpoints, q, k, ws, N, H, G, stream);
      [[fallthrough]];
    default:
      return make_error("gated_delta_chunked_forward: value_block ", value_block,
                        " unsupported (16, 32, 64, 128 ≤ head dim)");
  }
}

// ---- the recurrence, token by token ---------------------------------------------------------

// grid (H, D / 32), 256 threads: 32 value columns × 8 groups of D/8 rows, state in registers.
template <int D>
__global__ void __launch_bounds__(256) gdn_recurrent_kernel(bf16* __restrict__ o,
                                                            float* __restrict__ state,
                                                            const bf16* __restrict__ q,
                                                            const bf16* __restrict__ k,
                                                            const bf16* __restrict__ v,
                                                            const float* __restrict__ g,
                                                            const float* __restrict__ beta, int N,
                                                            int H, int G) {
  constexpr int R = D / 8;  // rows per thread
  __shared__ float red_r[2][8][32], red_o[2][8][32];
  const int h = blockIdx.x, hk = h / (H / G), e = threadIdx.x % 32, rg = threadIdx.x / 32;
  const int col = blockIdx.y * 32 + e;
  float* S = state + (size_t)h * D * D;
  float s[R];
#pragma unroll
  for (int i = 0; i < R; ++i) s[i] = S[(size_t)(rg * R + i) * D + col];
  for (int n = 0; n < N; ++n) {
    const int par = n & 1;
    const bf16* kn = k + ((size_t)n * G + hk) * D + rg * R;
    const bf16* qn = q + ((size_t)n * H + h) * D + rg * R;
    const float alpha = expf(g[(size_t)n * H + h]), b = beta[(size_t)n * H + h];
    const float vn = __bfloat162float(v[((size_t)n * G + hk) * D + col]);
    float kr[R], part = 0.0f;
#pragma unroll
    for (int i = 0; i < R; ++i) {
      kr[i] = __bfloat162float(kn[i]);
      part += kr[i] * s[i];
    }
    red_r[par][rg][e] = part;
    __syncthreads();
    float r = 0.0f;
#pragma unroll
    for (int x = 0; x < 8; ++x) r += red_r[par][x][e];
    const float u = b * (vn - alpha * r);
    float po = 0.0f;
#pragma unroll
    for (int i = 0; i < R; ++i) {
      s[i] = alpha * s[i] + kr[i] * u;
      po += __bfloat162float(qn[i]) * s[i];
    }
    red_o[par][rg][e] = po;
    __syncthreads();
    if (rg == 0) {
      float acc = 0.0f;
#pragma unroll
      for (int x = 0; x < 8; ++x) acc += red_o[par][x][e];
      o[((size_t)n * H + h) * D + col] = __float2bfloat16(acc);
    }
  }
#pragma unroll
  for (int i = 0; i < R; ++i) S[(size_t)(rg * R + i) * D + col] = s[i];
}

// ---- backward ------------------------------------------------------------------------------

// grid (H), D·4 threads: warp w holds value columns [8w, 8w + 8), lane l rows l + 32·rr.
// Per 64-token segment from the end: recompute the states from the chunk checkpoint into
// `scratch` (64, D, D) of this head, then step backwards through them.
template <int D>
__global__ void __launch_bounds__(D * 4) gdn_backward_kernel(
    float* __restrict__ dq, float* __restrict__ dk, float* __restrict__ dv,
    float* __restrict__ dg, float* __restrict__ dbeta, const bf16* __restrict__ dout,
    const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
    const float* __restrict__ g, const float* __restrict__ beta, int N, int H, int G,
    const float* __restrict__ checkpoints, float* __restrict__ scratch) {
  constexpr int RR = D / 32, NW = D / 8, C8 = 8;
  __shared__ float red_q[2][NW][D], red_k[2][NW][D], red_s[2][NW][2];
  const int h = blockIdx.x, hk = h / (H / G);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, col0 = warp * C8;
  const int NC = (N + kChunk - 1) / kChunk;
  float* scr = scratch + (size_t)h * kChunk * D * D;
  float dS[RR][C8];
#pragma unroll
  for (int rr = 0; rr < RR; ++rr)
#pragma unroll
    for (int j = 0; j < C8; ++j) dS[rr][j] = 0.0f;
  int step = 0;
  for (int c = NC - 1; c >= 0; --c) {
    const int c0 = c * kChunk, L = min(kChunk, N - c0);
    float Sx[RR][C8];
    const float* cp = checkpoints + ((size_t)h * NC + c) * D * D;
#pragma unroll
    for (int rr = 0; rr < RR; ++rr)
#pragma unroll
      for (int j = 0; j < C8; ++j) Sx[rr][j] = cp[(size_t)(lane + 32 * rr) * D + col0 + j];
    for (int i = 0; i < L; ++i) {  // scr[i] = S_{n−1} for n = c0 + i
      const int n = c0 + i;
      float* si = scr + (size_t)i * D * D;
      float kr[RR];
#pragma unroll
      for (int rr = 0; rr < RR; ++rr) {
        kr[rr] = __bfloat162float(k[((size_t)n * G + hk) * D + lane + 32 * rr]);
#pragma unroll
        for (int j = 0; j < C8; ++j) si[(size_t)(lane + 32 * rr) * D + col0 + j] = Sx[rr][j];
      }
      const float alpha = expf(g[(size_t)n * H + h]), b = beta[(size_t)n * H + h];
#pragma unroll
      for (int j = 0; j < C8; ++j) {
        float r = 0.0f;
#pragma unroll
        for (int rr = 0; rr < RR; ++rr) r += kr[rr] * Sx[rr][j];
        r = device::warp_sum(r);
        const float u = b * (__bfloat162float(v[((size_t)n * G + hk) * D + col0 + j]) - alpha * r);
#pragma unroll
        for (int rr = 0; rr < RR; ++rr) Sx[rr][j] = alpha * Sx[rr][j] + kr[rr] * u;
      }
    }
    for (int i = L - 1; i >= 0; --i, ++step) {
      const int n = c0 + i, par = step & 1;
      const float* si = scr + (size_t)i * D * D;
      float Pm[RR][C8], kr[RR], qr[RR], vj[C8], doj[C8];
#pragma unroll
      for (int rr = 0; rr < RR; ++rr) {
        kr[rr] = __bfloat162float(k[((size_t)n * G + hk) * D + lane + 32 * rr]);
        qr[rr] = __bfloat162float(q[((size_t)n * H + h) * D + lane + 32 * rr]);
#pragma unroll
        for (int j = 0; j < C8; ++j) Pm[rr][j] = si[(size_t)(lane + 32 * rr) * D + col0 + j];
      }
#pragma unroll
      for (int j = 0; j < C8; ++j) {
        vj[j] = __bfloat162float(v[((size_t)n * G + hk) * D + col0 + j]);
        doj[j] = __bfloat162float(dout[((size_t)n * H + h) * D + col0 + j]);
      }
      const float alpha = expf(g[(size_t)n * H + h]), b = beta[(size_t)n * H + h];
      float rj[C8], wj[C8], kdS[C8];
      float dq_part[RR], dk_part[RR], dSP = 0.0f;
#pragma unroll
      for (int rr = 0; rr < RR; ++rr) dq_part[rr] = dk_part[rr] = 0.0f;
#pragma unroll
      for (int j = 0; j < C8; ++j) {
        float r = 0.0f;
#pragma unroll
        for (int rr = 0; rr < RR; ++rr) r += kr[rr] * Pm[rr][j];
        rj[j] = device::warp_sum(r);
        wj[j] = vj[j] - alpha * rj[j];
        const float u = b * wj[j];
        float kd = 0.0f;
#pragma unroll
        for (int rr = 0; rr < RR; ++rr) {
          const float sn = alpha * Pm[rr][j] + kr[rr] * u;  // S_n
          dq_part[rr] += sn * doj[j];
          dS[rr][j] += qr[rr] * doj[j];
          kd += kr[rr] * dS[rr][j];
        }
        kdS[j] = device::warp_sum(kd);
      }
      float dbeta_w = 0.0f, dalpha_w = 0.0f;
#pragma unroll
      for (int j = 0; j < C8; ++j) {
        dbeta_w += kdS[j] * wj[j];
        dalpha_w -= b * kdS[j] * rj[j];
#pragma unroll
        for (int rr = 0; rr < RR; ++rr) {
          dSP += dS[rr][j] * Pm[rr][j];
          dk_part[rr] += b * dS[rr][j] * wj[j] - alpha * b * Pm[rr][j] * kdS[j];
          dS[rr][j] = alpha * (dS[rr][j] - b * kr[rr] * kdS[j]);
        }
      }
      if (lane < C8) {
        float mine = 0.0f;
#pragma unroll
        for (int j = 0; j < C8; ++j)
          if (j == lane) mine = kdS[j];
        atomicAdd(dv + ((size_t)n * G + hk) * D + col0 + lane, b * mine);
      }
#pragma unroll
      for (int rr = 0; rr < RR; ++rr) {
        red_q[par][warp][lane + 32 * rr] = dq_part[rr];
        red_k[par][warp][lane + 32 * rr] = dk_part[rr];
      }
      dSP = device::warp_sum(dSP);
      if (lane == 0) {
        red_s[par][warp][0] = dbeta_w;
        red_s[par][warp][1] = dalpha_w + dSP;
      }
      __syncthreads();
      if (tid < D) {
        float sq = 0.0f, sk = 0.0f;
#pragma unroll
        for (int w = 0; w < NW; ++w) {
          sq += red_q[par][w][tid];
          sk += red_k[par][w][tid];
        }
        dq[((size_t)n * H + h) * D + tid] = sq;
        atomicAdd(dk + ((size_t)n * G + hk) * D + tid, sk);
      } else if (tid == D) {
        float sb = 0.0f, sa = 0.0f;
#pragma unroll
        for (int w = 0; w < NW; ++w) {
          sb += red_s[par][w][0];
          sa += red_s[par][w][1];
        }
        dbeta[(size_t)n * H + h] = sb;
        dg[(size_t)n * H + h] = alpha * sa;
      }
    }
  }
}

Status check_shapes(const char* what, int N, int H, int G) {
  if (N <= 0 || H <= 0 || G <= 0 || H % G != 0)
    return make_error(what, ": bad shape N=", N, " H=", H, " G=", G, " (G must divide H)");
  return ok_status();
}

}  // namespace

size_t gated_delta_forward_workspace_bytes(int N, int H, int D, bool checkpoints) {
  const size_t NC = (N + kChunk - 1) / kChunk;
  size_t bytes = forward_workspace(nullptr, N, H, D).bytes;
  if (checkpoints) bytes += align_up(H * NC * D * D * sizeof(float));
  return bytes;
}

Status gated_delta_chunked_forward(bf16* o, float* state_final, const float* state_init,
                                   const bf16* q, const bf16* k, const bf16* v, const float* g,
                                   const float* beta, int N, int H, int G, int D, void* workspace,
                                   size_t workspace_bytes, cudaStream_t stream,
                                   float* checkpoints, int value_block) {
  GL_TRY(check_shapes("gated_delta_chunked_forward", N, H, G));
  const ForwardWorkspace ws = forward_workspace(workspace, N, H, D);
  if (workspace_bytes < ws.bytes)
    return make_error("gated_delta_chunked_forward: workspace of ", workspace_bytes,
                      " bytes, needs ", ws.bytes);
  return dispatch_head_dim(D, [&](auto d) {
    return chunked_forward<decltype(d)::value>(o, state_final, state_init, q, k, v, g, beta, N, H,
                                               G, ws, stream, checkpoints, value_block);
  });
}

Status gated_delta_recurrent_forward(bf16* o, float* state, const bf16* q, const bf16* k,
                                     const bf16* v, const float* g, const float* beta, int N,
                                     int H, int G, int D, cudaStream_t stream) {
  GL_TRY(check_shapes("gated_delta_recurrent_forward", N, H, G));
  return dispatch_head_dim(D, [&](auto d) -> Status {
    constexpr int Dc = decltype(d)::value;
    gdn_recurrent_kernel<Dc><<<dim3(H, Dc / 32), 256, 0, stream>>>(o, state, q, k, v, g, beta, N,
                                                                  H, G);
    GL_CUDA_CHECK_LAUNCH();
    return ok_status();
  });
}

size_t gated_delta_backward_workspace_bytes(int N, int H, int D) {
  return gated_delta_forward_workspace_bytes(N, H, D, true) +
         align_up((size_t)H * kChunk * D * D * sizeof(float)) +
         align_up((size_t)N * H * D * sizeof(bf16));
}

Status gated_delta_backward(float* dq, float* dk, float* dv, float* dg, float* dbeta,
                            const bf16* dout, const bf16* q, const bf16* k, const bf16* v,
                            const float* g, const float* beta, int N, int H, int G, int D,
                            void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  GL_TRY(check_shapes("gated_delta_backward", N, H, G));
  const size_t need = gated_delta_backward_workspace_bytes(N, H, D);
  if (workspace_bytes < need)
    return make_error("gated_delta_backward: workspace of ", workspace_bytes, " bytes, needs ",
                      need);
  const size_t NC = (N + kChunk - 1) / kChunk;
  char* base = static_cast<char*>(workspace);
  const size_t fwd = forward_workspace(nullptr, N, H, D).bytes;
  float* checkpoints = reinterpret_cast<float*>(base + fwd);
  float* scratch = reinterpret_cast<float*>(base + fwd + align_up(H * NC * D * D * sizeof(float)));
  bf16* o = reinterpret_cast<bf16*>(reinterpret_cast<char*>(scratch) +
                                    align_up((size_t)H * kChunk * D * D * sizeof(float)));
  GL_TRY(gated_delta_chunked_forward(o, nullptr, nullptr, q, k, v, g, beta, N, H, G, D, workspace,
                                     fwd, stream, checkpoints));
  GL_CUDA_CHECK(cudaMemsetAsync(dk, 0, (size_t)N * G * D * sizeof(float), stream));
  GL_CUDA_CHECK(cudaMemsetAsync(dv, 0, (size_t)N * G * D * sizeof(float), stream));
  return dispatch_head_dim(D, [&](auto d) -> Status {
    constexpr int Dc = decltype(d)::value;
    gdn_backward_kernel<Dc><<<H, Dc * 4, 0, stream>>>(dq, dk, dv, dg, dbeta, dout, q, k, v, g,
                                                      beta, N, H, G, checkpoints, scratch);
    GL_CUDA_CHECK_LAUNCH();
    return ok_status();
  });
}

}  // namespace golinear::kernels::cuda
