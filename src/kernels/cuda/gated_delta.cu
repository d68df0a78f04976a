// Gated DeltaNet on the GPU (see gated_delta.h for the math and the two-kernel chunked scheme).
// Tensor-core tiles are mma.sync m16n8k16 (bf16 operands, fp32 accumulators) on ldmatrix
// fragments from shared memory. The forward's and the reverse pass's bf16 tiles are dense and
// XOR-swizzled (tile_at); the backward's chunk kernel pads its rows by 16 bytes against bank
// conflicts. The prepare's triangular inverse merges on m16n8k8 in 3×tf32.
#include "kernels/cuda/gated_delta.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/mma_sync.cuh"

namespace golinear::kernels::cuda {

namespace {

using device::cp_async16;
using device::cp_async_commit;
using device::cp_async_wait;

constexpr int kChunk = kGatedDeltaChunk;  // 64
constexpr int kMaxSegments = 64;  // of the pipelined forward

using device::align_up;

// Where the chunked forward's scratch lives inside the workspace.
struct ForwardWorkspace {
  bf16* W;           // (H, NC, 64, D)
  bf16* U;           // (H, NC, 64, D)
  bf16* P;           // (H, NC, 64, 64)
  float* gamma;      // (H, NC, 64)
  float* gexp;       // (H, NC, 2, 64): e^{γ_m}, then e^{γ_last − γ_m}
  float* carry;      // 2 × (H, D, D): the state between the segments of a pipelined forward
  unsigned* ready;   // kMaxSegments counters, last: prepare blocks done per segment (persistent)
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
  w.gexp = reinterpret_cast<float*>(p + off), off += align_up(H * NC * 2 * kChunk * sizeof(float));
  w.carry = reinterpret_cast<float*>(p + off), off += align_up(2 * (size_t)H * D * D * sizeof(float));
  w.ready = reinterpret_cast<unsigned*>(p + off), off += align_up(kMaxSegments * sizeof(unsigned));
  w.bytes = off;
  return w;
}

// ---- mma.sync m16n8k16 / ldmatrix helpers (mma_sync.cuh's), and stmatrix ----------------------

using device::ldsm_x4;
using device::ldsm_x4_at;
using device::ldsm_x4_trans;
using device::ldsm_x4_trans_at;
using device::mma16816;
__device__ __forceinline__ void stsm_x4_trans(void* p, const uint32_t (&r)[4]) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n"
               ::"r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}
__device__ __forceinline__ void stsm_x4(void* p, const uint32_t (&r)[4]) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n"
               ::"r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}
// A warp's 16 × 8·NCH bf16 staging tile in shared memory, 16-byte vectors XOR-swizzled by row.
template <int NCH>
__device__ __forceinline__ bf16* stage_at(bf16* stg, int row, int vec) {
  return stg + row * (8 * NCH) + 8 * (vec ^ (row & (NCH - 1)));
}
// mma accumulators of n-tiles 2jp, 2jp + 1 (rows 0–7: a0, b0; rows 8–15: a1, b1) into the tile.
template <int NCH>
__device__ __forceinline__ void stage_put(bf16* stg, int jp, uint32_t a0, uint32_t a1, uint32_t b0,
                                          uint32_t b1, int lane) {
  const int mi = lane / 8, lr = lane % 8;
  const uint32_t r[4] = {a0, a1, b0, b1};
  stsm_x4(stage_at<NCH>(stg, lr + 8 * (mi & 1), 2 * jp + (mi >> 1)), r);
}
// The tile to global rows dst + row·ld, 16 bytes a lane.
template <int NCH>
__device__ __forceinline__ void stage_out(bf16* dst, int ld, bf16* stg, int lane) {
  __syncwarp();
#pragma unroll
  for (int x = 0; x < 16 * NCH / 32; ++x) {
    const int u = lane + 32 * x, row = u / NCH, vec = u % NCH;
    *reinterpret_cast<uint4*>(dst + (size_t)row * ld + 8 * vec) =
        *reinterpret_cast<const uint4*>(stage_at<NCH>(stg, row, vec));
  }
  __syncwarp();
}
using device::pack_bf16;

// Where row r, 8-column chunk c of a (64 or D) × COLS bf16 tile sits in shared memory, in
// elements: dense rows, each 128-byte half row's 16-byte chunks permuted by c ^ (r & 7). cp.async's
// 16-byte writes keep the 32-byte alignment of the global sectors they come from, and ldmatrix's
// 8 rows of a matrix (r & 7 = 0..7) still hit 8 distinct bank groups. (Rows padded by 16 bytes,
// the layout until session 18, left every odd row's sectors straddling two: Nsight Compute
// counted 2.6× the ideal shared-memory wavefronts for the loads, and the GDN forward was 2–4%
// slower at 16K–32K; BENCHMARKS.md session 18.) COLS is a multiple of 64.
//
// The state pass's ldmatrix addresses: a lane's matrix rows are
// base_row + (lane % 8), so r & 7 is the lane's own; its address for chunk c0 + 2j (c0 < 2, j a
// compile-time step) is lane_at(c0) ^ 32 (j & 3), plus 128 (j >> 2) for the second half row and
// any multiple of 8 rows as a constant — one XOR per load on one register, where per-(row, chunk)
// offsets kept ptxas at 255 registers. `tile` is 128-byte aligned (shared-space address); rows of
// ROWB bytes.
template <int COLS>
__device__ __forceinline__ int tile_at(int r, int c) {
  static_assert(COLS % 64 == 0, "tile rows of whole 128-byte halves");
  return r * COLS + 8 * ((c & ~7) | ((c ^ r) & 7));
}
// (swizzled_lane_at is tile_at<ROWB / 2>(row, c0) in bytes for c0 < 8, written out: through
// tile_at, ptxas emits different code for the state pass — 256 bytes more, not measured.)
template <int ROWB>
__device__ __forceinline__ unsigned swizzled_lane_at(unsigned tile, int row, int c0) {
  return tile + row * ROWB + 16 * ((c0 ^ row) & 7);
}
template <int ROWB>
__device__ __forceinline__ unsigned swizzled_step(unsigned lane_at, int j, int rows8) {
  return (lane_at ^ (32u * (j & 3))) + 128u * (j >> 2) + rows8 * 8 * ROWB;
}

// ---- kernel 1: chunk-local preparation ------------------------------------------------------
//
// One block of 8 warps per (chunk, head), ~70 KB of shared memory for D = 128 (3 blocks per SM),
// mma.sync m16n8k16 with fragments in registers:
//   1 warps 0–3: rows 16i.. of K Kᵀ → A = strict-lower(β_i e^{γi−γm} K Kᵀ) (fp32, shared);
//     warps 4–7: rows 16i.. of Q Kᵀ → P = lower(e^{γi−γm} Q Kᵀ) straight to global (bf16);
//     then V streams into Q's buffer behind the inverse;
//   2 T = (I + A)⁻¹ in fp32: 16 × 16 diagonal blocks by forward substitution, then 16 → 32 → 64
//     by T₂₁ = −T₂₂ A₂₁ T₁₁ (two levels on m16n8k8 in 3×tf32: level 1 a warp per tile, one
//     barrier; level 2 two barriers);
//   3 W = (T diag(βe^γ)) K and U = (T diag(β)) V, T's scaled copies in bf16, results straight to
//     global.
// (Measured slower, session 18, docs/BENCHMARKS.md: a block per chunk and 2 or 4 heads of one kv
// group, K and V loaded and K Kᵀ computed once for them — 102 KB and 128 registers leave 2 blocks
// an SM, and the prepare took 15% longer.)

template <int D>
struct PrepareLayout {
  static constexpr int LDA = 64 + 8;  // fp32 rows of A (the buffer later holds Tw, Tu)
  static constexpr int LDF = 64 + 4;  // fp32 rows of T
  static constexpr int LDT = 64 + 8;  // bf16 rows of Tw, Tu
  static constexpr size_t k = 0;
  static constexpr size_t qv = k + 64 * D * 2;  // K, then Q or V: swizzled dense (64, D) bf16
  static constexpr size_t a = qv + 64 * D * 2;
  static constexpr size_t t = a + 64 * LDA * 4;
  static constexpr size_t gam = t + 64 * LDF * 4;
  static constexpr size_t bet = gam + 64 * 4;
  static constexpr size_t eb = bet + 64 * 4;  // β e^γ
  static constexpr size_t total = eb + 64 * 4;
  static_assert(2 * 64 * LDT * 2 <= 64 * LDA * 4, "Tw and Tu must fit in A's buffer");
};

// grid (H, chunks), kPrepareThreads threads; chunk c = c_begin + blockIdx.y (chunk-major launch
// order). Writes W, U (64, D), P (64, 64), γ (64), e^γ and e^{γL−γ} (2 × 64) of chunk c, head h,
// and with T_out, T = (I + A)⁻¹ (bf16 64 × 64). SIGNAL (the persistent state pass: the chunks in
// done_groups even groups, group j = chunks ⌊NC·j/done_groups⌋ ..): each block then adds 1 to its
// chunk's group counter done[j], its writes made visible at gpu scope first (barrier, fence,
// atomic: the release half of cooperative groups' grid barrier).
constexpr int kPrepareThreads = 256;

// mma.sync m16n8k8 tf32 for the prepare's inverse (levels 1 and 2 below).
__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ void mma1688_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// acc += A B over the k-steps K0 ≤ ks < K1 (8 each): A a 16-row fp32 tile (rows lda apart, k along
// a row), B an fp32 tile of 8 columns (k rows ldb apart), both in shared memory; 3×tf32 (x = big +
// small, each tf32; acc += a_small b_big + a_big b_small + a_big b_big).
template <int K0, int K1>
__device__ __forceinline__ void mma_3xtf32(float (&acc)[4], const float* A, int lda, const float* B,
                                           int ldb, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int ks = K0; ks < K1; ++ks) {
    const int k = 8 * ks;
    const float af[4] = {A[g * lda + k + t], A[(g + 8) * lda + k + t], A[g * lda + k + t + 4],
                         A[(g + 8) * lda + k + t + 4]};
    const float bf[2] = {B[(k + t) * ldb + g], B[(k + t + 4) * ldb + g]};
    uint32_t ab[4], as[4], bb[2], bs[2];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      ab[i] = to_tf32(af[i]), as[i] = to_tf32(af[i] - __uint_as_float(ab[i]));
#pragma unroll
    for (int i = 0; i < 2; ++i)
      bb[i] = to_tf32(bf[i]), bs[i] = to_tf32(bf[i] - __uint_as_float(bb[i]));
    mma1688_tf32(acc, as, bb[0], bb[1]);
    mma1688_tf32(acc, ab, bs[0], bs[1]);
    mma1688_tf32(acc, ab, bb[0], bb[1]);
  }
}
// An m16n8 accumulator fragment, times s, to the fp32 tile D (rows ld apart).
__device__ __forceinline__ void store_frag(float* D, int ld, const float (&acc)[4], float s,
                                           int lane) {
  const int g = lane >> 2, t = lane & 3;
  *reinterpret_cast<float2*>(D + g * ld + 2 * t) = make_float2(s * acc[0], s * acc[1]);
  *reinterpret_cast<float2*>(D + (g + 8) * ld + 2 * t) = make_float2(s * acc[2], s * acc[3]);
}

// STAGED: W, U and P leave through per-warp shared staging tiles (in T's buffer, free then) as
// 16-byte row vectors instead of 4-byte fragment stores (fewer L1 store wavefronts).
template <int D, bool STAGED = false, bool SIGNAL = false>
__global__ void __launch_bounds__(kPrepareThreads, 3) gdn_prepare_kernel(
    bf16* __restrict__ W_out, bf16* __restrict__ U_out, bf16* __restrict__ P_out,
    float* __restrict__ gamma_out, float* __restrict__ gexp_out, const bf16* __restrict__ q,
    const bf16* __restrict__ k, const bf16* __restrict__ v, const float* __restrict__ g,
    const float* __restrict__ beta, int N, int H, int G, int c_begin, bf16* __restrict__ T_out,
    unsigned* done, int done_groups) {
  using L = PrepareLayout<D>;
  constexpr int LDA = L::LDA, LDF = L::LDF, LDT = L::LDT;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* Ks = reinterpret_cast<bf16*>(smem + L::k);
  bf16* QVs = reinterpret_cast<bf16*>(smem + L::qv);
  float* As = reinterpret_cast<float*>(smem + L::a);
  bf16* Tw = reinterpret_cast<bf16*>(smem + L::a);  // after the inverse
  bf16* Tu = Tw + 64 * LDT;
  float* Ts = reinterpret_cast<float*>(smem + L::t);
  float* gam = reinterpret_cast<float*>(smem + L::gam);
  float* bet = reinterpret_cast<float*>(smem + L::bet);
  float* ebs = reinterpret_cast<float*>(smem + L::eb);

  const int h = blockIdx.x, c = c_begin + blockIdx.y;
  const int NC = (N + kChunk - 1) / kChunk;
  const int c0 = c * kChunk, hk = h / (H / G);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int gi = lane / 4, ti = lane % 4, mi = lane / 8, lr = lane % 8;
  constexpr int VPR = D / 8;  // 16-byte vectors per row
  const size_t chunk = (size_t)h * NC + c;

  // Q and K (one group), zero-filled past the end of the sequence.
#pragma unroll
  for (int it = 0; it < 64 * VPR / kPrepareThreads; ++it) {
    const int idx = tid + it * kPrepareThreads;
    const int r = idx / VPR, cv = idx % VPR, n = c0 + r;
    const bool valid = n < N;
    cp_async16(QVs + tile_at<D>(r, cv), valid ? q + ((size_t)n * H + h) * D + cv * 8 : q,
               valid);
    cp_async16(Ks + tile_at<D>(r, cv), valid ? k + ((size_t)n * G + hk) * D + cv * 8 : k,
               valid);
  }
  cp_async_commit();
  if (warp == 0) {  // γ = inclusive cumulative sum of g (padded rows: no decay, no update)
    const int n0 = c0 + 2 * lane;
    const float a = n0 < N ? g[(size_t)n0 * H + h] : 0.0f;
    const float b = n0 + 1 < N ? g[(size_t)(n0 + 1) * H + h] : 0.0f;
    const float ba = n0 < N ? beta[(size_t)n0 * H + h] : 0.0f;
    const float bb = n0 + 1 < N ? beta[(size_t)(n0 + 1) * H + h] : 0.0f;
    float s = a + b;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const float t = __shfl_up_sync(0xffffffffu, s, off);
      if (lane >= off) s += t;
    }
    const float last = __shfl_sync(0xffffffffu, s, 31);
    const float ga = s - b, gb = s;
    gam[2 * lane] = ga, gam[2 * lane + 1] = gb;
    bet[2 * lane] = ba, bet[2 * lane + 1] = bb;
    const float ea = expf(ga), eb = expf(gb);
    ebs[2 * lane] = ba * ea, ebs[2 * lane + 1] = bb * eb;
    *reinterpret_cast<float2*>(gamma_out + chunk * 64 + 2 * lane) = make_float2(ga, gb);
    *reinterpret_cast<float2*>(gexp_out + chunk * 128 + 2 * lane) = make_float2(ea, eb);
    *reinterpret_cast<float2*>(gexp_out + chunk * 128 + 64 + 2 * lane) =
        make_float2(expf(last - ga), expf(last - gb));
  }
  cp_async_wait<0>();
  __syncthreads();

  // 1: rows 16i.. of X Kᵀ, X = K (warps 0–3) or Q (4–7); n-tiles of 8 keys up to the diagonal.
  // (Measured without gain, session 17: this step template-unrolled and balanced over the warps,
  // P computed beside the diagonal inverse — 19% fewer instructions, the same time: the kernel
  // follows its shared-memory wavefronts, see docs/NOTES.md.)
  {
    const int i = warp & 3;
    const bool is_q = warp >= 4;
    const bf16* X = is_q ? QVs : Ks;
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[j][r] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t a[4];
      ldsm_x4(a, X + tile_at<D>(16 * i + (lane & 15), 2 * kk + (lane >> 4)));
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        if (np <= i) {
          uint32_t b[4];
          ldsm_x4(b, Ks + tile_at<D>(16 * np + 8 * (mi >> 1) + lr, 2 * kk + (mi & 1)));
          mma16816(acc[2 * np], a, b[0], b[1]);
          mma16816(acc[2 * np + 1], a, b[2], b[3]);
        }
      }
    }
    bf16* P_chunk = P_out + chunk * 64 * 64;
    uint32_t pk[8][2];  // STAGED: P's packed values
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int row = 16 * i + gi + 8 * hr, m = 8 * j + 2 * ti;
        float v0 = 0.0f, v1 = 0.0f;
        if (j <= 2 * i + 1) {
          const float gr = gam[row];
          if (is_q) {
            if (m <= row) v0 = expf(gr - gam[m]) * acc[j][2 * hr];
            if (m + 1 <= row) v1 = expf(gr - gam[m + 1]) * acc[j][2 * hr + 1];
          } else {
            const float br = bet[row];
            if (m < row) v0 = br * expf(gr - gam[m]) * acc[j][2 * hr];
            if (m + 1 < row) v1 = br * expf(gr - gam[m + 1]) * acc[j][2 * hr + 1];
          }
        }
        if (is_q) {
          if constexpr (STAGED)
            pk[j][hr] = pack_bf16(v0, v1);
          else
            *reinterpret_cast<uint32_t*>(P_chunk + row * 64 + m) = pack_bf16(v0, v1);
        } else if (j <= 2 * i + 1) {
          *reinterpret_cast<float2*>(As + row * LDA + m) = make_float2(v0, v1);
        }
      }
    }
    if constexpr (STAGED) {
      if (is_q) {  // T's buffer is untouched until the inverse: 4 tiles of 16 × 64
        bf16* stg = reinterpret_cast<bf16*>(smem + L::t) + i * 16 * 64;
#pragma unroll
        for (int jp = 0; jp < 4; ++jp)
          stage_put<8>(stg, jp, pk[2 * jp][0], pk[2 * jp][1], pk[2 * jp + 1][0], pk[2 * jp + 1][1],
                       lane);
        stage_out<8>(P_chunk + 16 * i * 64, 64, stg, lane);
      }
    }
  }
  __syncthreads();  // A complete; Q no longer read
  // V into Q's buffer, behind the inverse.
#pragma unroll
  for (int it = 0; it < 64 * VPR / kPrepareThreads; ++it) {
    const int idx = tid + it * kPrepareThreads;
    const int r = idx / VPR, cv = idx % VPR, n = c0 + r;
    const bool valid = n < N;
    cp_async16(QVs + tile_at<D>(r, cv), valid ? v + ((size_t)n * G + hk) * D + cv * 8 : v,
               valid);
  }
  cp_async_commit();

  // 2: T = (I + A)⁻¹. Diagonal blocks: warp w < 4 inverts block w, lane j < 16 one column
  // (zeros above the diagonal inside the block).
  if (warp < 4 && lane < 16) {
    const int b0 = 16 * warp, j = lane;
    float col[16];
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      float s = r == j ? 1.0f : 0.0f;
#pragma unroll
      for (int m = 0; m < r; ++m) s -= As[(b0 + r) * LDA + b0 + m] * col[m];
      col[r] = r < j ? 0.0f : s;
    }
#pragma unroll
    for (int r = 0; r < 16; ++r) Ts[(b0 + r) * LDF + b0 + j] = col[r];
  }
  __syncthreads();
  // Levels 1 and 2 on tensor cores: mma.sync m16n8k8 in 3×tf32 (each fp32 operand split into a
  // tf32 part and its tf32 remainder; the small × small product dropped: fp32-level accuracy, as
  // fla's solve_tril 'tf32x3'), a warp per 16 × 8 tile of each product. The scalar form these
  // replace read its operands from shared memory once per output column pair.
  // Level 1: T₁₀ = −T₁₁ (A₁₀ T₀₀), T₃₂ = −T₃₃ (A₃₂ T₂₂): warp w < 4 takes block pair w / 2 and
  // column tile w % 2 of both products; Y in T's unused upper blocks (rows 0–15 × columns 16–31,
  // rows 32–47 × columns 48–63), read back by the same warp.
  if (warp < 4) {
    const int blk = warp >> 1, nt = warp & 1, cb = 32 * blk, rb = 16 + 32 * blk;
    float y[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mma_3xtf32<0, 2>(y, As + rb * LDA + cb, LDA, Ts + cb * LDF + cb + 8 * nt, LDF, lane);
    store_frag(Ts + cb * LDF + rb + 8 * nt, LDF, y, 1.0f, lane);
    __syncwarp();
    float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mma_3xtf32<0, 2>(t, Ts + rb * LDF + rb, LDF, Ts + cb * LDF + rb + 8 * nt, LDF, lane);
    store_frag(Ts + rb * LDF + cb + 8 * nt, LDF, t, -1.0f, lane);
  }
  __syncthreads();
  // Level 2: T_hl = −T_hh (A_hl T_ll) over 32 × 32 halves; warp w: rows 16 (w / 4) of the half,
  // columns 8 (w % 4). Y in rows 0–31 × columns 32–63. T_ll's block (0, 1) and T_hh's block
  // (2, 3) hold level 1's scratch: their k-steps are skipped (T is lower triangular).
  {
    const int mt = warp >> 2, nt = warp & 3;
    float y[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (nt < 2)
      mma_3xtf32<0, 4>(y, As + (32 + 16 * mt) * LDA, LDA, Ts + 8 * nt, LDF, lane);
    else
      mma_3xtf32<2, 4>(y, As + (32 + 16 * mt) * LDA, LDA, Ts + 8 * nt, LDF, lane);
    store_frag(Ts + 16 * mt * LDF + 32 + 8 * nt, LDF, y, 1.0f, lane);
  }
  __syncthreads();
  {
    const int mt = warp >> 2, nt = warp & 3;
    float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (mt == 0)
      mma_3xtf32<0, 2>(t, Ts + 32 * LDF + 32, LDF, Ts + 32 + 8 * nt, LDF, lane);
    else
      mma_3xtf32<0, 4>(t, Ts + 48 * LDF + 32, LDF, Ts + 32 + 8 * nt, LDF, lane);
    store_frag(Ts + (32 + 16 * mt) * LDF + 8 * nt, LDF, t, -1.0f, lane);
  }
  __syncthreads();
  // 3: Tw = T diag(βe^γ), Tu = T diag(β) (bf16, zero above the diagonal) into A's buffer.
  bf16* Tg = T_out ? T_out + chunk * 64 * 64 : nullptr;
  {  // thread: columns m, m + 1 (fixed), rows warp + 8x
    const int m = 2 * lane;
    const float2 eb2 = *reinterpret_cast<const float2*>(ebs + m);
    const float2 be2 = *reinterpret_cast<const float2*>(bet + m);
#pragma unroll 4
    for (int i = warp; i < 64; i += kPrepareThreads / 32) {
      const float2 tt = *reinterpret_cast<const float2*>(Ts + i * LDF + m);
      const float t0 = m <= i ? tt.x : 0.0f, t1 = m + 1 <= i ? tt.y : 0.0f;
      *reinterpret_cast<uint32_t*>(Tw + i * LDT + m) = pack_bf16(t0 * eb2.x, t1 * eb2.y);
      *reinterpret_cast<uint32_t*>(Tu + i * LDT + m) = pack_bf16(t0 * be2.x, t1 * be2.y);
      if (Tg) *reinterpret_cast<uint32_t*>(Tg + i * 64 + m) = pack_bf16(t0, t1);
    }
  }
  cp_async_wait<0>();
  __syncthreads();
  // W = Tw K, U = Tu V: warp → row tile i, column half; T lower triangular: k tiles ≤ i.
  {
    const int i = warp & 3, cb = (warp >> 2) * (D / 2);
    constexpr int NT8 = D / 16;  // n-tiles of 8 per warp
#pragma unroll
    for (int which = 0; which < 2; ++which) {
      const bf16* Tm = which == 0 ? Tw : Tu;
      const bf16* B = which == 0 ? Ks : QVs;
      float acc[NT8][4];
#pragma unroll
      for (int j = 0; j < NT8; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[j][r] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        if (kk <= i) {
          uint32_t a[4];
          ldsm_x4(a, Tm + (16 * i + (lane & 15)) * LDT + 16 * kk + 8 * (lane >> 4));
#pragma unroll
          for (int np = 0; np < NT8 / 2; ++np) {
            uint32_t b[4];
            ldsm_x4_trans(b, B + tile_at<D>(16 * kk + 8 * (mi & 1) + lr,
                                                 cb / 8 + 2 * np + (mi >> 1)));
            mma16816(acc[2 * np], a, b[0], b[1]);
            mma16816(acc[2 * np + 1], a, b[2], b[3]);
          }
        }
      }
      bf16* out = (which == 0 ? W_out : U_out) + chunk * 64 * D;
      if constexpr (STAGED) {  // T's fp32 buffer is free now: 8 tiles of 16 × D/2
        bf16* stg = reinterpret_cast<bf16*>(smem + L::t) + warp * 16 * (D / 2);
#pragma unroll
        for (int jp = 0; jp < NT8 / 2; ++jp)
          stage_put<NT8>(stg, jp, pack_bf16(acc[2 * jp][0], acc[2 * jp][1]),
                         pack_bf16(acc[2 * jp][2], acc[2 * jp][3]),
                         pack_bf16(acc[2 * jp + 1][0], acc[2 * jp + 1][1]),
                         pack_bf16(acc[2 * jp + 1][2], acc[2 * jp + 1][3]), lane);
        stage_out<NT8>(out + 16 * i * D + cb, D, stg, lane);
      } else {
#pragma unroll
        for (int j = 0; j < NT8; ++j) {
          const int row = 16 * i + gi, col = cb + 8 * j + 2 * ti;
          *reinterpret_cast<uint32_t*>(out + row * D + col) = pack_bf16(acc[j][0], acc[j][1]);
          *reinterpret_cast<uint32_t*>(out + (row + 8) * D + col) =
              pack_bf16(acc[j][2], acc[j][3]);
        }
      }
    }
  }
  if constexpr (SIGNAL) {
    __syncthreads();
    if (tid == 0) {
      __threadfence();  // the largest j with ⌊NC·j/groups⌋ ≤ c:
      atomicAdd(done + (int)(((long)(c + 1) * done_groups + NC - 1) / NC - 1), 1u);
    }
  }
}


// ---- kernel 2: the sequential state pass ----------------------------------------------------
//
// Register-resident state, one warp per 16 value columns. The warp holds Sᵀ (16 value columns ×
// D key rows) as fp32 mma.sync m16n8k16 accumulators; an accumulator pair of n-tiles is exactly
// the A operand of the next product (the FlashAttention-2 P→A trick), so the chain
//   Xᵀ = Sᵀ Wᵀ,  ũᵀ = Uᵀ − Xᵀ,  Sᵀ ← e^{γL} Sᵀ + (ũ e^{γL−γ})ᵀ K
// never leaves registers and needs no barrier between warps: the columns of S evolve
// independently. The output rides along off the chain: Oᵀ = diag-scaled Sᵀ Qᵀ + ũᵀ Pᵀ.
// Per chunk the block stages W, Q, K (64, D), P (64, 64), the U slice and e^γ, e^{γL−γ} with cp.async,
// STAGES deep; one __syncthreads per chunk.

template <int D, int BV>
struct StateLayout {
  static constexpr int NW = BV / 16;              // warps, 16 value columns each
  static constexpr int STAGES = BV <= 64 ? 3 : 2;
  static constexpr int LDU = BV + 8, LDO = 16 + 8;
  static constexpr size_t w = 0;  // W, Q, K (64, D) and P (64, 64): swizzled dense bf16 tiles
  static constexpr size_t q = w + 64 * D * 2;
  static constexpr size_t k = q + 64 * D * 2;
  static constexpr size_t p = k + 64 * D * 2;
  static constexpr size_t u = p + 64 * 64 * 2;
  static constexpr size_t gm = u + 64 * LDU * 2;
  static constexpr size_t stage_bytes = (gm + 128 * 4 + 127) / 128 * 128;  // gm: 128 floats
  static constexpr size_t ostage = STAGES * stage_bytes;  // per warp (64, 16) bf16
  static constexpr size_t total = ostage + NW * 64 * LDO * 2;
};

// What the persistent state pass waits for: wait group s (chunks b[s] .. b[s + 1] − 1) is
// prepared once ready[s] counts blocks_per_chunk · (b[s + 1] − b[s]) prepare blocks
// (gdn_prepare_kernel's `done`). Passed by value (kernel parameter space); unused without WAIT.
struct SegmentWait {
  const unsigned* ready = nullptr;
  int n = 0, blocks_per_chunk = 0;
  int b[kMaxSegments + 1] = {};
};
// Spins (one thread) until *p ≥ target; the acquire load orders this thread's later reads after
// the producers' writes, and the block barrier that follows extends that to the block (the
// acquire half of cooperative groups' grid barrier). A watchdog turns a wait of more than ~8.6 s
// (the producers never ran: a runtime that serialized the launches) into a trap, an error the
// caller sees at its next synchronization, instead of a hang.
__device__ __forceinline__ unsigned ld_acquire_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}
__device__ __forceinline__ void wait_at_least(const unsigned* p, unsigned target) {
  if (ld_acquire_gpu(p) >= target) return;
  const unsigned long long t0 = global_ns();
  while (ld_acquire_gpu(p) < target) {
    __nanosleep(128);
    if (global_ns() - t0 > (1ull << 33)) __trap();
  }
}

// grid (D / BV, H), 32·BV/16 threads: head h, value columns [slice·BV, slice·BV + BV).
// checkpoints: fp32 (H, NC, D, D) as S, or with CK_BF16 bf16 (H, NC, D, D) as Sᵀ (backward).
// WAIT (the persistent pass, c_begin = wait.b[0]): before staging the first chunk of wait group
// s, thread 0 waits until the group's prepares are done (W, U, P and e^γ arrive by cp.async.cg,
// which reads L2, never a stale L1 line); the arithmetic is the same as without.
template <int D, int BV, bool CK_BF16 = false, bool WAIT = false>
__global__ void __launch_bounds__(BV * 2, 1) gdn_state_pass_kernel(
    bf16* __restrict__ o, float* __restrict__ state_final, const float* __restrict__ state_init,
    void* __restrict__ checkpoints, const bf16* __restrict__ q, const bf16* __restrict__ k,
    const bf16* __restrict__ W, const bf16* __restrict__ U, const bf16* __restrict__ P,
    const float* __restrict__ gexp, int N, int H, int G, int c_begin, int c_end,
    const SegmentWait wait) {
  using L = StateLayout<D, BV>;
  constexpr int LDU = L::LDU, LDO = L::LDO, NT = L::NW * 32;
  constexpr int VPR = D / 8, ND = D / 8, KD = D / 16, STAGES = L::STAGES;
  extern __shared__ __align__(128) unsigned char smem[];

  const int slice = blockIdx.x, h = blockIdx.y, col0 = slice * BV;
  const int NC = (N + kChunk - 1) / kChunk, hk = h / (H / G);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int gi = lane / 4, ti = lane % 4;  // mma fragment row / column-pair index
  const int wc = warp * 16;                // this warp's columns inside the slice
  bf16* Os = reinterpret_cast<bf16*>(smem + L::ostage) + warp * 64 * LDO;

  auto load_stage = [&](int c, int st) {
    unsigned char* base = smem + st * L::stage_bytes;
    bf16* Ws = reinterpret_cast<bf16*>(base + L::w);
    bf16* Qs = reinterpret_cast<bf16*>(base + L::q);
    bf16* Ks = reinterpret_cast<bf16*>(base + L::k);
    bf16* Ps = reinterpret_cast<bf16*>(base + L::p);
    bf16* Us = reinterpret_cast<bf16*>(base + L::u);
    float* gs = reinterpret_cast<float*>(base + L::gm);
    // Fixed trip counts, per-thread row / column from tid, pointers stepped by constants.
    const int c0 = c * kChunk;
    const size_t chunk_row = ((size_t)h * NC + c) * 64;
    constexpr int RW = NT / VPR;  // rows per pass (W, Q, K)
    const int r0 = tid / VPR, v0 = (tid % VPR) * 8;
    const bf16* wp = W + (chunk_row + r0) * D + v0;
    const bf16* qp = q + ((size_t)(c0 + r0) * H + h) * D + v0;
    const bf16* kp = k + ((size_t)(c0 + r0) * G + hk) * D + v0;
    const size_t q_step = (size_t)RW * H * D, k_step = (size_t)RW * G * D;
    if (c0 + 64 <= N) {
#pragma unroll
      for (int it = 0; it < 64 / RW; ++it) {
        const int so = tile_at<D>(r0 + it * RW, v0 / 8);
        cp_async16(Ws + so, wp + (size_t)it * RW * D, true);
        cp_async16(Qs + so, qp + it * q_step, true);
        cp_async16(Ks + so, kp + it * k_step, true);
      }
    } else {  // the ragged last chunk: rows past N zero-filled
#pragma unroll
      for (int it = 0; it < 64 / RW; ++it) {
        const int so = tile_at<D>(r0 + it * RW, v0 / 8);
        const bool valid = c0 + r0 + it * RW < N;
        cp_async16(Ws + so, wp + (size_t)it * RW * D, true);
        cp_async16(Qs + so, valid ? qp + it * q_step : q, valid);
        cp_async16(Ks + so, valid ? kp + it * k_step : k, valid);
      }
    }
    {
      constexpr int RP = NT / 8;  // P: 8 vectors per row
      const int rp = tid / 8, vp = (tid % 8) * 8;
      const bf16* pp = P + (chunk_row + rp) * 64 + vp;
#pragma unroll
      for (int it = 0; it < 64 / RP; ++it)
        cp_async16(Ps + tile_at<64>(rp + it * RP, vp / 8), pp + it * RP * 64, true);
    }
    {
      constexpr int VU = BV / 8, RU = NT / VU;  // U slice: BV / 8 vectors per row
      const int ru = tid / VU, vu = (tid % VU) * 8;
      const bf16* up = U + (chunk_row + ru) * D + col0 + vu;
#pragma unroll
      for (int it = 0; it < 64 / RU; ++it)
        cp_async16(Us + (ru + it * RU) * LDU + vu, up + (size_t)it * RU * D, true);
    }
    if (tid < 32) cp_async16(gs + tid * 4, gexp + chunk_row * 2 + tid * 4, true);
  };

  // WAIT: the next segment to wait for and its first chunk (all threads keep them alike);
  // wait_through(c): thread 0 waits for every segment that starts at or before chunk c.
  int wait_seg = 0, wait_chunk = WAIT ? wait.b[0] : 0;
  auto wait_through = [&](int c) {
    while (wait_chunk <= c) {
      if (tid == 0)
        wait_at_least(wait.ready + wait_seg, (unsigned)(wait.blocks_per_chunk *
                                                        (wait.b[wait_seg + 1] - wait.b[wait_seg])));
      ++wait_seg;
      wait_chunk = wait_seg < wait.n ? wait.b[wait_seg] : INT_MAX;
    }
  };
  if constexpr (WAIT) {  // the wait groups of the first STAGES − 1 chunks
    wait_through(c_begin + STAGES - 2);
    __syncthreads();
  }
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (c_begin + s < c_end) load_stage(c_begin + s, s);
    cp_async_commit();
  }
  // The state, read after the first stages' loads are issued (a pipelined segment starts with
  // both). Sᵀ: n-tile nt holds key rows d = 8nt + 2ti + {0,1}; registers {0,1} value column gi,
  // {2,3} value column gi + 8.
  float S[ND][4];
#pragma unroll
  for (int nt = 0; nt < ND; ++nt)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int d = 8 * nt + 2 * ti + (r & 1), e = col0 + wc + gi + 8 * (r >> 1);
      S[nt][r] = state_init ? state_init[((size_t)h * D + d) * D + e] : 0.0f;
    }
  // ldmatrix lane addressing: matrix mi = lane / 8, row lr = lane % 8.
  const int mi = lane / 8, lr = lane % 8;
  for (int c = c_begin; c < c_end; ++c) {
    cp_async_wait<STAGES - 2>();
    if constexpr (WAIT) wait_through(c + STAGES - 1);  // chunk c + STAGES − 1 is staged below
    __syncthreads();  // chunk c visible to all; every warp is done with chunk c − 1's stage
    if (c + STAGES - 1 < c_end) load_stage(c + STAGES - 1, (c - c_begin + STAGES - 1) % STAGES);
    cp_async_commit();
    unsigned char* base = smem + ((c - c_begin) % STAGES) * L::stage_bytes;
    const bf16* Ws = reinterpret_cast<const bf16*>(base + L::w);
    const bf16* Qs = reinterpret_cast<const bf16*>(base + L::q);
    const bf16* Ks = reinterpret_cast<const bf16*>(base + L::k);
    const bf16* Ps = reinterpret_cast<const bf16*>(base + L::p);
    const bf16* Us = reinterpret_cast<const bf16*>(base + L::u);
    const float* gs = reinterpret_cast<const float*>(base + L::gm);
    // The lanes' ldmatrix bases in the swizzled W, Q, K, P tiles.
    const unsigned sbase = static_cast<unsigned>(__cvta_generic_to_shared(base));
    const unsigned w_lane = swizzled_lane_at<2 * D>(sbase + L::w, 8 * (mi >> 1) + lr, mi & 1);
    const unsigned q_lane = swizzled_lane_at<2 * D>(sbase + L::q, 8 * (mi >> 1) + lr, mi & 1);
    const unsigned k_lane = swizzled_lane_at<2 * D>(sbase + L::k, 8 * (mi & 1) + lr, mi >> 1);
    const unsigned p_lane = swizzled_lane_at<128>(sbase + L::p, 8 * (mi >> 1) + lr, mi & 1);

    if (checkpoints) {
      if constexpr (CK_BF16) {  // Sᵀ: row = value column, pairs of key rows packed
        bf16* cp = static_cast<bf16*>(checkpoints) + ((size_t)h * NC + c) * D * D;
        const int e = col0 + wc + gi;
#pragma unroll
        for (int nt = 0; nt < ND; ++nt) {
          const int d = 8 * nt + 2 * ti;
          *reinterpret_cast<uint32_t*>(cp + (size_t)e * D + d) = pack_bf16(S[nt][0], S[nt][1]);
          *reinterpret_cast<uint32_t*>(cp + (size_t)(e + 8) * D + d) =
              pack_bf16(S[nt][2], S[nt][3]);
        }
      } else {
        float* cp = static_cast<float*>(checkpoints) + ((size_t)h * NC + c) * D * D;
#pragma unroll
        for (int nt = 0; nt < ND; ++nt)
#pragma unroll
          for (int r = 0; r < 4; ++r)
            cp[(size_t)(8 * nt + 2 * ti + (r & 1)) * D + col0 + wc + gi + 8 * (r >> 1)] = S[nt][r];
      }
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
        uint32_t bw[4], bq[4];
        // row = 8 (2np + (mi >> 1)) + lr, chunk (mi & 1) + 2kk
        ldsm_x4_at(bw, swizzled_step<2 * D>(w_lane, kk, 2 * np));
        ldsm_x4_at(bq, swizzled_step<2 * D>(q_lane, kk, 2 * np));
        mma16816(X[2 * np], a, bw[0], bw[1]);
        mma16816(X[2 * np + 1], a, bw[2], bw[3]);
        mma16816(Y[2 * np], a, bq[0], bq[1]);
        mma16816(Y[2 * np + 1], a, bq[2], bq[3]);
      }
    }
    const float decay_last = gs[63];  // gs: e^γ (64), then e^{γL−γ} (64)
    // ũᵀ = Uᵀ − Xᵀ (into X); Yᵀ column i scaled by e^{γ_i}.
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      // Uᵀ tiles by transposing ldmatrix: matrices (n-tile 2np, columns lo), (2np, hi),
      // (2np + 1, lo), (2np + 1, hi); lane gets U[m = 8nt + 2ti + {0,1}][wc + gi (+8)].
      uint32_t u4[4];
      ldsm_x4_trans(u4, Us + (16 * np + 8 * (mi >> 1) + lr) * LDU + wc + 8 * (mi & 1));
#pragma unroll
      for (int hn = 0; hn < 2; ++hn) {
        const int nt = 2 * np + hn, m0 = 8 * nt + 2 * ti;
        const float e0 = gs[m0], e1 = gs[m0 + 1];
        Y[nt][0] *= e0, Y[nt][1] *= e1, Y[nt][2] *= e0, Y[nt][3] *= e1;
        const float2 ulo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u4[2 * hn]));
        const float2 uhi =
            __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u4[2 * hn + 1]));
        X[nt][0] = ulo.x - X[nt][0], X[nt][1] = ulo.y - X[nt][1];
        X[nt][2] = uhi.x - X[nt][2], X[nt][3] = uhi.y - X[nt][3];
      }
    }
    // A operands: ũᵀ (for P) and (ũ e^{γL−γ})ᵀ (for the state update), k over m.
    uint32_t ua[4][4], ud[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const int m0 = 16 * kk + 2 * ti;
      const float d0 = gs[64 + m0], d1 = gs[64 + m0 + 1];
      const float d8 = gs[64 + m0 + 8], d9 = gs[64 + m0 + 9];
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
        uint32_t bp[4];
        // row = 8 (2np + (mi >> 1)) + lr, chunk (mi & 1) + 2kk
        ldsm_x4_at(bp, swizzled_step<128>(p_lane, kk, 2 * np));
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
        uint32_t bk[4];
        // row = 8 (2kk + (mi & 1)) + lr, chunk (mi >> 1) + 2np
        ldsm_x4_trans_at(bk, swizzled_step<2 * D>(k_lane, np, 2 * kk));
        mma16816(S[2 * np], ud[kk], bk[0], bk[1]);
        mma16816(S[2 * np + 1], ud[kk], bk[2], bk[3]);
      }
    }
    // Output: Oᵀ (16 columns × 64 tokens) through this warp's staging tile to global.
#pragma unroll
    for (int np = 0; np < 4; ++np) {  // transposing stmatrix, matrices as the U loads above
      const uint32_t r4[4] = {pack_bf16(Y[2 * np][0], Y[2 * np][1]),
                              pack_bf16(Y[2 * np][2], Y[2 * np][3]),
                              pack_bf16(Y[2 * np + 1][0], Y[2 * np + 1][1]),
                              pack_bf16(Y[2 * np + 1][2], Y[2 * np + 1][3])};
      stsm_x4_trans(Os + (16 * np + 8 * (mi >> 1) + lr) * LDO + 8 * (mi & 1), r4);
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

// (Two state passes on Hopper's warpgroup MMA, wgmma, were correct but not faster and were
// removed: session 3's (canonical tiles, value block 64) and session 19's (128-byte swizzle atoms,
// a warpgroup per 64 value columns, one or two blocks a head; commit fd1e062). Reading the B tiles
// once per warpgroup did not shorten the chain; numbers in docs/BENCHMARKS.md.)
// (A two-stage state pass for D = 128, 64 value columns, 151 KB of shared memory so that one
// prepare block fits beside it, was slower pipelined: H200, 32K 1.41 → 1.55 ms; with the
// swizzled tiles and the persistent pass, 146 KB, session 18: the same time, its segment
// prepares faster and the pass slower.)
// (Measured slower and removed, session 17, docs/BENCHMARKS.md: fla's split — the persistent
// pass writing each chunk's bf16 Sᵀ and ũ, a chunk-parallel kernel computing the outputs — 16K
// 0.83 → 0.99 ms, 32K 1.62 → 1.97: the outputs land on the SMs the prepares already bind; and
// the persistent pass at value block 128, whose 8 warps an SM take twice as long a chunk.)
// wait: the persistent pass (value_block 32 or 64, no checkpoints).
template <int D, int BV>
Status launch_state_pass(bf16* o, float* state_final, const float* state_init, void* checkpoints,
                         bool ck_bf16, const bf16* q, const bf16* k, const ForwardWorkspace& ws,
                         int N, int H, int G, int c_begin, int c_end, cudaStream_t stream,
                         const SegmentWait* wait = nullptr) {
  using L = StateLayout<D, BV>;
  if (wait) {
    if constexpr (BV == 32 || BV == 64) {
      auto kernel = gdn_state_pass_kernel<D, BV, false, true>;
      GL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)L::total));
      kernel<<<dim3(D / BV, H), L::NW * 32, L::total, stream>>>(
          o, state_final, state_init, nullptr, q, k, ws.W, ws.U, ws.P, ws.gexp, N, H, G, c_begin,
          c_end, *wait);
      GL_CUDA_CHECK_LAUNCH();
      return ok_status();
    }
    return make_error("gated_delta_chunked_forward: no persistent state pass at value_block ", BV);
  }
  auto kernel = ck_bf16 ? gdn_state_pass_kernel<D, BV, true> : gdn_state_pass_kernel<D, BV, false>;
  GL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)L::total));
  kernel<<<dim3(D / BV, H), L::NW * 32, L::total, stream>>>(o, state_final, state_init,
                                                             checkpoints, q, k, ws.W, ws.U, ws.P,
                                                             ws.gexp, N, H, G, c_begin, c_end,
                                                             SegmentWait{});
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

template <int D>
int resolved_value_block(int value_block) {
  return value_block == 0 ? (D == 128 ? 64 : 32) : value_block;
}
template <int D>
Status state_pass(int value_block, bf16* o, float* state_final, const float* state_init,
                  void* checkpoints, bool ck_bf16, const bf16* q, const bf16* k,
                  const ForwardWorkspace& ws, int N, int H, int G, int c_begin, int c_end,
                  cudaStream_t stream, const SegmentWait* wait = nullptr) {
  switch (resolved_value_block<D>(value_block)) {
    case 16:
      return launch_state_pass<D, 16>(o, state_final, state_init, checkpoints, ck_bf16, q, k, ws,
                                      N, H, G, c_begin, c_end, stream, wait);
    case 32:
      return launch_state_pass<D, 32>(o, state_final, state_init, checkpoints, ck_bf16, q, k, ws,
                                      N, H, G, c_begin, c_end, stream, wait);
    case 64:
      return launch_state_pass<D, 64>(o, state_final, state_init, checkpoints, ck_bf16, q, k, ws,
                                      N, H, G, c_begin, c_end, stream, wait);
    case 128:
      if constexpr (D == 128)
        return launch_state_pass<D, 128>(o, state_final, state_init, checkpoints, ck_bf16, q, k,
                                         ws, N, H, G, c_begin, c_end, stream, wait);
      [[fallthrough]];
    default:
      return make_error("gated_delta_chunked_forward: value_block ", value_block,
                        " unsupported (16, 32, 64, 128 ≤ head dim)");
  }
}

// The prepare kernel, its shared memory allowed (SIGNAL: the persistent pass's; staged: the
// staged stores, else the fragment stores).
template <int D, bool SIGNAL = false>
Result<decltype(&gdn_prepare_kernel<D, true, SIGNAL>)> prepare_kernel(bool staged) {
  using L = PrepareLayout<D>;
  static_assert(8 * 16 * (D / 2) * 2 <= 64 * L::LDF * 4, "W/U staging tiles must fit in T's buffer");
  auto prepare =
      staged ? gdn_prepare_kernel<D, true, SIGNAL> : gdn_prepare_kernel<D, false, SIGNAL>;
  GL_CUDA_CHECK(cudaFuncSetAttribute(prepare, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)L::total));
  return prepare;
}
template <int D>
Status launch_prepare(const bf16* q, const bf16* k, const bf16* v, const float* g,
                      const float* beta, int N, int H, int G, const ForwardWorkspace& ws,
                      int c_begin, int c_end, bf16* T_out, cudaStream_t stream, bool staged) {
  GL_ASSIGN_OR_RETURN(auto prepare, prepare_kernel<D>(staged));
  prepare<<<dim3(H, c_end - c_begin), kPrepareThreads, PrepareLayout<D>::total, stream>>>(
      ws.W, ws.U, ws.P, ws.gamma, ws.gexp, q, k, v, g, beta, N, H, G, c_begin, T_out, nullptr,
      0);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

// Pipelined forward (options.segments = 1 turns it off): the chunks split into
// segments; the state pass of segment s (on a high-priority side stream) overlaps the prepare of
// segment s + 1 (on the caller's stream), the state carried between segments in the workspace.
// Segments of the pipelined forward: `requested` (options.segments) if > 0, else one per 32
// chunks, at most 16 (H200, H = 32, G = 8, D = 128, one segment → auto: 8K 0.49 → 0.42 ms, 16K
// 0.96 → 0.79, 32K 1.90 → 1.50; with the prepare's staged stores 32K 1.70 → 1.41).
int forward_segments(int NC, int requested) {
  const int n = requested > 0 ? requested : std::clamp(NC / 32, 1, 16);
  return std::min({n, NC, kMaxSegments});
}
// Chunk boundaries b[0..NS] of the pipelined forward's NS even segments. (Measured slower and
// removed: a taper, half a segment first and a half and a quarter last, 16K 0.724 → 0.741 ms;
// two prepare streams alternating, 16K 0.716 → 0.738–0.760 ms; H200, H = 32, G = 8, D = 128.)
void segment_bounds(int NC, int NS, int (&b)[kMaxSegments + 1]) {
  for (int s = 0; s <= NS; ++s) b[s] = (int)((long)NC * s / NS);
}
// The pipeline's side stream and events: `stream` (high priority) runs the state passes;
// `ready[s % 2]` marks segment s prepared, `fork` the caller's stream at entry, `join` the state
// passes done. One event per purpose suffices: cudaStreamWaitEvent waits on the record current at
// the time of the call, so re-recording an event for a later segment does not disturb an earlier
// wait.
struct SideStream {
  int device = -1;
  int sms = 0;  // the device's multiprocessors
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr, ready[2] = {};
};
// The side streams of one host thread, one per device, created on first use and released when
// the thread exits (for the main thread: at exit(), before the CUDA runtime's own teardown).
// Errors on release are ignored (a device reset may already have destroyed them).
// Destroys what exists of `s` (errors ignored: nothing to report, and a device reset may already
// have destroyed them).
void release(SideStream& s) {
  for (cudaEvent_t e : {s.fork, s.join, s.ready[0], s.ready[1]})
    if (e) cudaEventDestroy(e);
  if (s.stream) cudaStreamDestroy(s.stream);
  s = SideStream{};
}
struct SideStreams {
  static constexpr int kMaxDevices = 16;  // beyond: unpipelined
  SideStream per_device[kMaxDevices];
  SideStreams() = default;
  SideStreams(const SideStreams&) = delete;
  SideStreams& operator=(const SideStreams&) = delete;
  ~SideStreams() {
    int current = -1;
    const bool have_current = cudaGetDevice(&current) == cudaSuccess;
    for (SideStream& s : per_device) {
      if (s.device < 0) continue;
      if (cudaSetDevice(s.device) == cudaSuccess) release(s);
      s = SideStream{};
    }
    if (have_current) cudaSetDevice(current);
    cudaGetLastError();  // leave no sticky error from a torn-down runtime behind
  }
};
// This thread's side streams for the current device, created on first use; null while the
// caller's stream is being captured and they do not exist yet (creating them then would break
// the capture).
Result<SideStream*> side_stream(cudaStream_t stream) {
  thread_local SideStreams streams;
  int dev = 0;
  GL_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= SideStreams::kMaxDevices) return static_cast<SideStream*>(nullptr);
  SideStream& s = streams.per_device[dev];
  if (s.device == dev) return &s;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  GL_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) return static_cast<SideStream*>(nullptr);
  int least = 0, greatest = 0;
  GL_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  SideStream made;
  bool ok = cudaStreamCreateWithPriority(&made.stream, cudaStreamNonBlocking, greatest) ==
            cudaSuccess;
  for (cudaEvent_t* e : {&made.fork, &made.join, &made.ready[0], &made.ready[1]})
    ok = ok && cudaEventCreateWithFlags(e, cudaEventDisableTiming) == cudaSuccess;
  if (!ok) {
    release(made);
    cudaGetLastError();
    return make_error("gated_delta_chunked_forward: creating the pipeline's streams failed");
  }
  if (cudaDeviceGetAttribute(&made.sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    made.sms = 0;  // unknown: no persistent state pass
    cudaGetLastError();
  }
  made.device = dev;
  s = made;
  return &s;
}

// The persistent state pass (by default from 128 chunks on, T ≥ 8K; options.persistent never or
// always overrides): ONE state-pass launch on the side stream for all chunks, its state in
// registers throughout. The chunks form NG even wait groups (kPersistentWaitGroups, at most the
// chunks; options.wait_groups overrides): before staging the first chunk of group j
// (gdn_state_pass_kernel's WAIT) the pass waits until all H·(its chunks) prepare blocks have
// counted themselves in ws.ready[j] (zeroed on `stream` first). The prepares run on `stream` in
// NL launches of even chunk ranges (kPersistentLaunches; options.segments overrides), each block
// counting itself in its chunk's group. No relaunch of the state pass, so no state-pass block
// waits for an SM to drain of prepare blocks except once at the start.
// (Measured, session 20, docs/BENCHMARKS.md; GDN forward at 16K / 32K, means of six rounds,
// two calls: waits and launches per pipeline segment, 8 at 16K and 16 at 32K, the previous
// default, 0.737–0.745 / 1.425–1.431 ms; 64 groups under those launches 0.686 / 1.420; 64
// groups and 4 launches 0.645–0.672 / 1.365–1.402; 2, 3 or 8 launches within the rounds' spread
// of 4; two launches, the first of 15–40% of the chunks to be prepared by the whole GPU before
// the pass starts, 0.657–0.714 / 1.416–1.434 — the pass took its SMs during the first launch
// all the same; the prepare at 4 blocks an SM, T in Q's buffer (53 KB, 64 registers), 315 / 634
// against 331 / 626 µs alone.)
// Deadlock freedom: the prepares never wait; they are queued before the state pass (so even
// serialized execution, CUDA_LAUNCH_BLOCKING=1 or streams sharing a hardware queue, runs them
// first), and the spinning grid leaves at least kPersistentFreeSms multiprocessors free, so the
// prepares always find room. Used only when that holds (value_block 32 or 64: (D / vb)·H blocks
// ≤ SMs − kPersistentFreeSms) and outside stream capture (a graph gives no concurrency
// guarantee); otherwise the pipeline below runs. Assumes no other spinning work holds the
// remaining SMs (two persistent forwards at once from different host threads on one device
// still leave 4 SMs at H = 32; more could starve their prepares).
// (Measured slower and removed: queueing the state pass after the first prepare launch; with
// the waits per segment, fewer, larger prepare launches.)
constexpr int kPersistentFreeSms = 8;
// From 8K (H = 32, G = 8, D = 128; session 20): 0.327 against the pipeline's 0.338 ms. (With the
// waits per segment, session 7: 0.392 against 0.385 ms, so the threshold was 16K then.)
constexpr int kPersistentMinChunks = 128;
constexpr int kPersistentWaitGroups = 64;  // ≤ kMaxSegments (the counters)
constexpr int kPersistentLaunches = 4;
bool persistent_wanted(int NC, GatedDeltaPersistent mode) {
  switch (mode) {
    case GatedDeltaPersistent::never: return false;
    case GatedDeltaPersistent::always: return true;
    case GatedDeltaPersistent::automatic: break;
  }
  return NC >= kPersistentMinChunks;
}
template <int D>
Result<bool> persistent_usable(const SideStream& side, int H, int value_block,
                               cudaStream_t stream) {
  const int vb = resolved_value_block<D>(value_block);
  if (vb != 32 && vb != 64) return false;
  if ((long)(D / vb) * H > side.sms - kPersistentFreeSms) return false;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  GL_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  return capture == cudaStreamCaptureStatusNone;
}
template <int D>
Status persistent_forward(bf16* o, float* state_final, const float* state_init, const bf16* q,
                          const bf16* k, const bf16* v, const float* g, const float* beta, int N,
                          int H, int G, const ForwardWorkspace& ws, cudaStream_t stream,
                          int value_block, SideStream& side,
                          const GatedDeltaForwardOptions& options) {
  const int NC = (N + kChunk - 1) / kChunk;
  const int NG = std::min({options.wait_groups > 0 ? options.wait_groups : kPersistentWaitGroups,
                           NC, kMaxSegments});
  const int NL = std::min({options.segments > 0 ? options.segments : kPersistentLaunches, NC,
                           kMaxSegments});
  SegmentWait wait;
  wait.ready = ws.ready;
  wait.n = NG;
  wait.blocks_per_chunk = H;
  segment_bounds(NC, NG, wait.b);
  int launches[kMaxSegments + 1];
  segment_bounds(NC, NL, launches);
  GL_CUDA_CHECK(cudaMemsetAsync(ws.ready, 0, NG * sizeof(unsigned), stream));
  GL_CUDA_CHECK(cudaEventRecord(side.fork, stream));
  GL_CUDA_CHECK(cudaStreamWaitEvent(side.stream, side.fork, 0));
  GL_ASSIGN_OR_RETURN(auto prepare, (prepare_kernel<D, true>(options.staged_prepare)));
  // (Measured without gain, session 17: each launch as a programmatic dependent of the one
  // before, filling the SMs the previous launch drains.)
  for (int l = 0; l < NL; ++l) {
    const int cb = launches[l], ce = launches[l + 1];
    prepare<<<dim3(H, ce - cb), kPrepareThreads, PrepareLayout<D>::total, stream>>>(
        ws.W, ws.U, ws.P, ws.gamma, ws.gexp, q, k, v, g, beta, N, H, G, cb, nullptr, ws.ready,
        NG);
    GL_CUDA_CHECK_LAUNCH();
  }
  GL_TRY(state_pass<D>(value_block, o, state_final, state_init, nullptr, false, q, k, ws, N, H, G,
                       0, NC, side.stream, &wait));
  GL_CUDA_CHECK(cudaEventRecord(side.join, side.stream));
  GL_CUDA_CHECK(cudaStreamWaitEvent(stream, side.join, 0));
  return ok_status();
}

// checkpoints: fp32 S (ck_bf16 false) or bf16 Sᵀ (true) entering every chunk, or null; T_out:
// T = (I + A)⁻¹ per chunk (bf16 (H, NC, 64, 64)) or null.
template <int D>
Status chunked_forward(bf16* o, float* state_final, const float* state_init, const bf16* q,
                       const bf16* k, const bf16* v, const float* g, const float* beta, int N,
                       int H, int G, const ForwardWorkspace& ws, cudaStream_t stream,
                       void* checkpoints, int value_block, bf16* T_out = nullptr,
                       bool ck_bf16 = false, const GatedDeltaForwardOptions& options = {}) {
  const int NC = (N + kChunk - 1) / kChunk;
  int bounds[kMaxSegments + 1];
  const int NS = checkpoints || T_out ? 1 : forward_segments(NC, options.segments);
  const bool staged = options.staged_prepare;
  segment_bounds(NC, NS, bounds);
  SideStream* side = nullptr;
  if (NS > 1) {
    GL_ASSIGN_OR_RETURN(side, side_stream(stream));
  }
  if (!side) {
    GL_TRY(launch_prepare<D>(q, k, v, g, beta, N, H, G, ws, 0, NC, T_out, stream, staged));
    return state_pass<D>(value_block, o, state_final, state_init, checkpoints, ck_bf16, q, k, ws,
                         N, H, G, 0, NC, stream);
  }
  if (persistent_wanted(NC, options.persistent)) {
    GL_ASSIGN_OR_RETURN(const bool usable, persistent_usable<D>(*side, H, value_block, stream));
    if (usable)
      return persistent_forward<D>(o, state_final, state_init, q, k, v, g, beta, N, H, G, ws,
                                   stream, value_block, *side, options);
  }
  // Every prepare on `stream`, one after another; segment s's state pass on the side stream.
  float* carry[2] = {ws.carry, ws.carry + (size_t)H * D * D};
  for (int s = 0; s < NS; ++s) {
    const int cb = bounds[s], ce = bounds[s + 1];
    GL_TRY(launch_prepare<D>(q, k, v, g, beta, N, H, G, ws, cb, ce, nullptr, stream, staged));
    GL_CUDA_CHECK(cudaEventRecord(side->ready[s % 2], stream));
    GL_CUDA_CHECK(cudaStreamWaitEvent(side->stream, side->ready[s % 2], 0));
    GL_TRY(state_pass<D>(value_block, o, s == NS - 1 ? state_final : carry[s % 2],
                         s == 0 ? state_init : carry[(s + 1) % 2], nullptr, false, q, k, ws, N,
                         H, G, cb, ce, side->stream));
  }
  // Every prepare precedes a state pass: joining the state passes joins them too.
  GL_CUDA_CHECK(cudaEventRecord(side->join, side->stream));
  GL_CUDA_CHECK(cudaStreamWaitEvent(stream, side->join, 0));
  return ok_status();
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
//
// Chunked backward of the WY form (the math of cpu::gated_delta_blocked_backward), three steps:
//   1 the chunked forward with checkpoints (S entering every chunk, fp32) and T = (I + A)⁻¹;
//   2 reverse state pass (kernel 3): sequential over chunks from the end, parallel over heads ×
//     value-column slices like kernel 2 (the columns of dS evolve independently); each warp holds
//     dSᵀ (16 value columns × D key rows, dS = gradient of the state leaving the chunk) in mma
//     registers. Per chunk: write dSᵀ (bf16), then
//       dŨᵀ = dOᵀ P + (dSᵀ Kᵀ) diag(e^{γL−γ})                  (written, bf16 (64, D)),
//       dSᵀ ← e^{γL} dSᵀ + dOᵀ diag(e^γ) Q − dŨᵀ W;
//   3 chunk-parallel gradients (kernel 4, grid chunks × kv heads, mma.sync): for each query head of
//     the group in order, dq, dg, dβ written, dk and dv accumulated in fp32 registers over the
//     group by the block that owns those rows (deterministic, no atomics).

// 2 packed bf16 scaled by (s0, s1), repacked.
__device__ __forceinline__ uint32_t scale_bf16x2(uint32_t x, float s0, float s1) {
  const float2 f = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&x));
  return pack_bf16(f.x * s0, f.y * s1);
}

// grid (D / BV, H), 32·BV/16 threads. dS_out (H, NC, Dv, Dk) bf16 (transposed: row = value
// column); dUt_out (H, NC, 64, D) bf16. The stage's U slot holds the dO slice.
template <int D, int BV>
__global__ void __launch_bounds__(BV * 2, 1) gdn_reverse_pass_kernel(
    bf16* __restrict__ dS_out, bf16* __restrict__ dUt_out, const bf16* __restrict__ dout,
    const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ W,
    const bf16* __restrict__ P, const float* __restrict__ gamma, int N, int H, int G) {
  using L = StateLayout<D, BV>;
  constexpr int LDU = L::LDU, LDO = L::LDO, NT = L::NW * 32;
  constexpr int VPR = D / 8, ND = D / 8, KD = D / 16, STAGES = L::STAGES;
  extern __shared__ __align__(128) unsigned char smem[];

  const int slice = blockIdx.x, h = blockIdx.y, col0 = slice * BV;
  const int NC = (N + kChunk - 1) / kChunk, hk = h / (H / G);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int gi = lane / 4, ti = lane % 4;
  const int wc = warp * 16;
  bf16* Os = reinterpret_cast<bf16*>(smem + L::ostage) + warp * 64 * LDO;

  float S[ND][4];  // dSᵀ, the layout of kernel 2's Sᵀ
#pragma unroll
  for (int nt = 0; nt < ND; ++nt)
#pragma unroll
    for (int r = 0; r < 4; ++r) S[nt][r] = 0.0f;

  auto load_stage = [&](int c, int st) {
    unsigned char* base = smem + st * L::stage_bytes;
    bf16* Ws = reinterpret_cast<bf16*>(base + L::w);
    bf16* Qs = reinterpret_cast<bf16*>(base + L::q);
    bf16* Ks = reinterpret_cast<bf16*>(base + L::k);
    bf16* Ps = reinterpret_cast<bf16*>(base + L::p);
    bf16* Ds = reinterpret_cast<bf16*>(base + L::u);
    float* gs = reinterpret_cast<float*>(base + L::gm);
    const int c0 = c * kChunk;
    const size_t chunk_row = ((size_t)h * NC + c) * 64;
    for (int idx = tid; idx < 64 * VPR; idx += NT) {
      const int r = idx / VPR, cv = idx % VPR, n = c0 + r;
      const bool valid = n < N;
      cp_async16(Ws + tile_at<D>(r, cv), W + (chunk_row + r) * D + cv * 8, true);
      cp_async16(Qs + tile_at<D>(r, cv), valid ? q + ((size_t)n * H + h) * D + cv * 8 : q,
                 valid);
      cp_async16(Ks + tile_at<D>(r, cv), valid ? k + ((size_t)n * G + hk) * D + cv * 8 : k,
                 valid);
    }
    for (int idx = tid; idx < 64 * 8; idx += NT) {
      const int r = idx / 8, cv = idx % 8;
      cp_async16(Ps + tile_at<64>(r, cv), P + (chunk_row + r) * 64 + cv * 8, true);
    }
    for (int idx = tid; idx < 64 * (BV / 8); idx += NT) {
      const int r = idx / (BV / 8), cv = idx % (BV / 8), n = c0 + r;
      const bool valid = n < N;
      cp_async16(Ds + r * LDU + cv * 8,
                 valid ? dout + ((size_t)n * H + h) * D + col0 + cv * 8 : dout, valid);
    }
    for (int idx = tid; idx < 16; idx += NT) cp_async16(gs + idx * 4, gamma + chunk_row + idx * 4, true);
  };

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < NC) load_stage(NC - 1 - s, s);
    cp_async_commit();
  }
  const int mi = lane / 8, lr = lane % 8;
  for (int s = 0; s < NC; ++s) {
    const int c = NC - 1 - s;
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    if (s + STAGES - 1 < NC) load_stage(NC - 1 - (s + STAGES - 1), (s + STAGES - 1) % STAGES);
    cp_async_commit();
    unsigned char* base = smem + (s % STAGES) * L::stage_bytes;
    const bf16* Ws = reinterpret_cast<const bf16*>(base + L::w);
    const bf16* Qs = reinterpret_cast<const bf16*>(base + L::q);
    const bf16* Ks = reinterpret_cast<const bf16*>(base + L::k);
    const bf16* Ps = reinterpret_cast<const bf16*>(base + L::p);
    const bf16* Ds = reinterpret_cast<const bf16*>(base + L::u);
    const float* gs = reinterpret_cast<const float*>(base + L::gm);
    // The lanes' ldmatrix bases in the swizzled K, P, Q, W tiles.
    const unsigned sbase = static_cast<unsigned>(__cvta_generic_to_shared(base));
    const unsigned k_lane = swizzled_lane_at<2 * D>(sbase + L::k, 8 * (mi >> 1) + lr, mi & 1);
    const unsigned p_lane = swizzled_lane_at<128>(sbase + L::p, 8 * (mi & 1) + lr, mi >> 1);
    const unsigned q_lane = swizzled_lane_at<2 * D>(sbase + L::q, 8 * (mi & 1) + lr, mi >> 1);
    const unsigned w_lane = swizzled_lane_at<2 * D>(sbase + L::w, 8 * (mi & 1) + lr, mi >> 1);

    {  // dSᵀ of the state leaving chunk c: rows = value columns, pairs of key rows packed.
      bf16* out = dS_out + ((size_t)h * NC + c) * D * D;
      const int e = col0 + wc + gi;
#pragma unroll
      for (int nt = 0; nt < ND; ++nt) {
        const int d = 8 * nt + 2 * ti;
        *reinterpret_cast<uint32_t*>(out + (size_t)e * D + d) = pack_bf16(S[nt][0], S[nt][1]);
        *reinterpret_cast<uint32_t*>(out + (size_t)(e + 8) * D + d) = pack_bf16(S[nt][2], S[nt][3]);
      }
    }
    // Xᵀ = dSᵀ Kᵀ (16 × 64), k over the D key rows.
    float X[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int r = 0; r < 4; ++r) X[nt][r] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) {
      uint32_t a[4] = {pack_bf16(S[2 * kk][0], S[2 * kk][1]), pack_bf16(S[2 * kk][2], S[2 * kk][3]),
                       pack_bf16(S[2 * kk + 1][0], S[2 * kk + 1][1]),
                       pack_bf16(S[2 * kk + 1][2], S[2 * kk + 1][3])};
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t bk[4];
        // row = 8 (2np + (mi >> 1)) + lr, chunk (mi & 1) + 2kk
        ldsm_x4_at(bk, swizzled_step<2 * D>(k_lane, kk, 2 * np));
        mma16816(X[2 * np], a, bk[0], bk[1]);
        mma16816(X[2 * np + 1], a, bk[2], bk[3]);
      }
    }
    const float gl = gs[63], decay_last = expf(gl);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int m0 = 8 * nt + 2 * ti;
      const float d0 = expf(gl - gs[m0]), d1 = expf(gl - gs[m0 + 1]);
      X[nt][0] *= d0, X[nt][1] *= d1, X[nt][2] *= d0, X[nt][3] *= d1;
    }
    // dOᵀ as A operands (k over tokens), plain and scaled by e^{γ_i}.
    uint32_t da[4][4], de[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      ldsm_x4_trans(da[kk], Ds + (16 * kk + 8 * (mi >> 1) + lr) * LDU + wc + 8 * (mi & 1));
      const int i0 = 16 * kk + 2 * ti;
      const float e0 = expf(gs[i0]), e1 = expf(gs[i0 + 1]);
      const float e8 = expf(gs[i0 + 8]), e9 = expf(gs[i0 + 9]);
      de[kk][0] = scale_bf16x2(da[kk][0], e0, e1);
      de[kk][1] = scale_bf16x2(da[kk][1], e0, e1);
      de[kk][2] = scale_bf16x2(da[kk][2], e8, e9);
      de[kk][3] = scale_bf16x2(da[kk][3], e8, e9);
    }
    // dŨᵀ += dOᵀ P (P lower triangular: token i ≥ m).
#pragma unroll
    for (int np = 0; np < 4; ++np) {
#pragma unroll
      for (int kk = np; kk < 4; ++kk) {
        uint32_t bp[4];
        // row = 8 (2kk + (mi & 1)) + lr, chunk (mi >> 1) + 2np
        ldsm_x4_trans_at(bp, swizzled_step<128>(p_lane, np, 2 * kk));
        mma16816(X[2 * np], da[kk], bp[0], bp[1]);
        mma16816(X[2 * np + 1], da[kk], bp[2], bp[3]);
      }
    }
    // dŨ out through the warp's staging tile.
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int i = 8 * nt + 2 * ti;
      Os[i * LDO + gi] = __float2bfloat16(X[nt][0]);
      Os[(i + 1) * LDO + gi] = __float2bfloat16(X[nt][1]);
      Os[i * LDO + gi + 8] = __float2bfloat16(X[nt][2]);
      Os[(i + 1) * LDO + gi + 8] = __float2bfloat16(X[nt][3]);
    }
    __syncwarp();
    {
      bf16* out = dUt_out + ((size_t)h * NC + c) * 64 * D;
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        const int idx = lane + 32 * x, r = idx / 2, half = idx % 2;
        *reinterpret_cast<uint4*>(out + (size_t)r * D + col0 + wc + 8 * half) =
            *reinterpret_cast<const uint4*>(Os + r * LDO + 8 * half);
      }
    }
    __syncwarp();
    // −dŨᵀ as A operands, k over m.
    uint32_t un[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const float* x0 = X[2 * kk];
      const float* x1 = X[2 * kk + 1];
      un[kk][0] = pack_bf16(-x0[0], -x0[1]);
      un[kk][1] = pack_bf16(-x0[2], -x0[3]);
      un[kk][2] = pack_bf16(-x1[0], -x1[1]);
      un[kk][3] = pack_bf16(-x1[2], -x1[3]);
    }
    // dSᵀ ← e^{γL} dSᵀ + (dOᵀ diag(e^γ)) Q − dŨᵀ W.
#pragma unroll
    for (int nt = 0; nt < ND; ++nt)
#pragma unroll
      for (int r = 0; r < 4; ++r) S[nt][r] *= decay_last;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
      for (int np = 0; np < ND / 2; ++np) {
        uint32_t bq[4], bw[4];
        // row = 8 (2kk + (mi & 1)) + lr, chunk (mi >> 1) + 2np
        ldsm_x4_trans_at(bq, swizzled_step<2 * D>(q_lane, np, 2 * kk));
        ldsm_x4_trans_at(bw, swizzled_step<2 * D>(w_lane, np, 2 * kk));
        mma16816(S[2 * np], de[kk], bq[0], bq[1]);
        mma16816(S[2 * np + 1], de[kk], bq[2], bq[3]);
        mma16816(S[2 * np], un[kk], bw[0], bw[1]);
        mma16816(S[2 * np + 1], un[kk], bw[2], bw[3]);
      }
    }
  }
}

// C (M × N, fp32 row-major, ldc) = or += op(A) op(B) [+ op(A2) op(B2)] over the block's warps:
// mma.sync m16n8k16 (bf16 → fp32) on ldmatrix fragments, each warp a WM × WN tile. op(A) (M × K):
// A row-major [M][K], or with TA stored [K][M] (ldmatrix .trans). op(B) (K × N): B row-major
// [K][N] (.trans), or with TB stored [N][K]. Rows of A and B 16-byte aligned. (It replaced a
// wmma form whose address arithmetic and generic loads were most of the chunk-gradient
// kernel's instructions: Nsight Compute, session 14.)
template <bool TA, bool TB, int M, int N, int K>
__device__ __forceinline__ void block_mma(float* C, int ldc, const bf16* A, int lda, const bf16* B,
                                          int ldb, bool accumulate, const bf16* A2 = nullptr,
                                          int lda2 = 0, const bf16* B2 = nullptr, int ldb2 = 0) {
  constexpr int WN = 32, WM = (M / 32) * (N / WN) >= 8 ? 32 : 16;
  static_assert(M % WM == 0 && N % WN == 0 && K % 16 == 0, "block_mma: tile shape");
  constexpr int MI = WM / 16, NI = WN / 8, GROUPS_N = N / WN, GROUPS = (M / WM) * GROUPS_N;
  const int warp = threadIdx.x / 32, nw = blockDim.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, c2 = lane % 4 * 2, q = lane / 8, r8 = lane % 8;
  for (int t = warp; t < GROUPS; t += nw) {
    const int i0 = (t / GROUPS_N) * WM, j0 = (t % GROUPS_N) * WN;
    float acc[MI][NI][4];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const float* c = C + (i0 + mi * 16 + g) * ldc + j0 + ni * 8 + c2;
        if (accumulate) {
          const float2 lo = *reinterpret_cast<const float2*>(c);
          const float2 hi = *reinterpret_cast<const float2*>(c + 8 * ldc);
          acc[mi][ni][0] = lo.x, acc[mi][ni][1] = lo.y, acc[mi][ni][2] = hi.x, acc[mi][ni][3] = hi.y;
        } else {
          acc[mi][ni][0] = acc[mi][ni][1] = acc[mi][ni][2] = acc[mi][ni][3] = 0.0f;
        }
      }
    auto product = [&](const bf16* A_, int lda_, const bf16* B_, int ldb_) {
#pragma unroll 2
      for (int k0 = 0; k0 < K; k0 += 16) {
        uint32_t a[MI][4], b[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          const int m0 = i0 + mi * 16;
          if constexpr (TA)  // 8 × 8 matrix q: k rows k0 + 8(q/2), m columns m0 + 8(q%2)
            ldsm_x4_trans(a[mi], A_ + (k0 + r8 + (q >> 1) * 8) * lda_ + m0 + (q & 1) * 8);
          else               // rows m0 + (lane % 16), k columns k0 + 8(lane / 16)
            ldsm_x4(a[mi], A_ + (m0 + lane % 16) * lda_ + k0 + (lane / 16) * 8);
        }
#pragma unroll
        for (int np = 0; np < NI / 2; ++np) {  // two n8 tiles a load: b0, b1 of each
          const int n0 = j0 + np * 16;
          uint32_t r[4];
          if constexpr (TB)  // matrix q: n rows n0 + 8(q/2), k columns k0 + 8(q%2)
            ldsm_x4(r, B_ + (n0 + r8 + (q >> 1) * 8) * ldb_ + k0 + (q & 1) * 8);
          else               // matrix q: k rows k0 + 8(q%2), n columns n0 + 8(q/2)
            ldsm_x4_trans(r, B_ + (k0 + r8 + (q & 1) * 8) * ldb_ + n0 + (q >> 1) * 8);
          b[2 * np][0] = r[0], b[2 * np][1] = r[1], b[2 * np + 1][0] = r[2], b[2 * np + 1][1] = r[3];
        }
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) mma16816(acc[mi][ni], a[mi], b[ni][0], b[ni][1]);
      }
    };
    product(A, lda, B, ldb);
    if (A2) product(A2, lda2, B2, ldb2);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        float* c = C + (i0 + mi * 16 + g) * ldc + j0 + ni * 8 + c2;
        *reinterpret_cast<float2*>(c) = make_float2(acc[mi][ni][0], acc[mi][ni][1]);
        *reinterpret_cast<float2*>(c + 8 * ldc) = make_float2(acc[mi][ni][2], acc[mi][ni][3]);
      }
  }
}


template <int D>
struct GradLayout {
  static constexpr int LDB = D + 8, LDF = 64 + 4, LDA = D + 4, LDZ = 64 + 8;
  static constexpr size_t tile = 64 * LDB * 2;  // bf16 (64, D)
  static constexpr size_t q = 0, k = q + tile, dO = k + tile, w = dO + tile, u = w + tile;
  static constexpr size_t ut = u + tile, dut = ut + tile;
  // bf16 (D, D): S_0, then dSᵀ; then fp32 (64, D): the dk of the current head.
  static constexpr size_t s0 = dut + tile;
  static constexpr size_t s0_bytes = align_up(std::max<size_t>(D * LDB * 2, 64 * LDA * 4), 128);
  static constexpr size_t f1 = s0 + s0_bytes;  // fp32 (64, 64); bf16 T in step 4
  static constexpr size_t zb = f1 + 64 * LDF * 4;
  static constexpr size_t acc = zb + 64 * LDZ * 2;  // fp32 (64, D) or (64, 64)
  static constexpr size_t vec = acc + align_up(64 * std::max(LDA, LDF) * 4, 128);
  static constexpr size_t total = vec + (5 * 64 + 32) * 4;
};

constexpr int kGradThreads = 256;

// grid (NC, G), 256 threads: chunk c, kv head hk, the H/G query heads of the group in order.
template <int D, bool CK_BF16>
__global__ void __launch_bounds__(kGradThreads, 1) gdn_chunk_grad_kernel(
    float* __restrict__ dq, float* __restrict__ dk, float* __restrict__ dv,
    float* __restrict__ dg, float* __restrict__ dbeta, const bf16* __restrict__ dout,
    const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
    const float* __restrict__ beta, const bf16* __restrict__ Wg, const bf16* __restrict__ Ug,
    const bf16* __restrict__ Tg, const float* __restrict__ gamma, const void* __restrict__ ckS,
    const bf16* __restrict__ ckdS, const bf16* __restrict__ dUtg, int N, int H, int G) {
  using L = GradLayout<D>;
  constexpr int LDB = L::LDB, LDF = L::LDF, LDA = L::LDA, LDZ = L::LDZ, VPR = D / 8;
  constexpr int NT = kGradThreads, NW = NT / 32;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* Qs = reinterpret_cast<bf16*>(smem + L::q);
  bf16* Ks = reinterpret_cast<bf16*>(smem + L::k);
  bf16* dOs = reinterpret_cast<bf16*>(smem + L::dO);  // dO, then dW
  bf16* Ws = reinterpret_cast<bf16*>(smem + L::w);
  bf16* Us = reinterpret_cast<bf16*>(smem + L::u);
  bf16* Uts = reinterpret_cast<bf16*>(smem + L::ut);    // Ũ, then dβV (= Tᵀ dU)
  bf16* dUts = reinterpret_cast<bf16*>(smem + L::dut);  // dŨ, then dβe^γK (= Tᵀ dW)
  bf16* S0s = reinterpret_cast<bf16*>(smem + L::s0);
  float* DK = reinterpret_cast<float*>(smem + L::s0);
  float* F1 = reinterpret_cast<float*>(smem + L::f1);
  bf16* Tb = reinterpret_cast<bf16*>(smem + L::f1);
  bf16* Zb = reinterpret_cast<bf16*>(smem + L::zb);
  float* Acc = reinterpret_cast<float*>(smem + L::acc);
  float* gam = reinterpret_cast<float*>(smem + L::vec);
  float* bet = gam + 64;
  float* red = bet + 64;
  float* bred = red + 64;  // 32 floats
  float* rsum = bred + 32;
  float* csum = rsum + 64;

  const int c = blockIdx.x, hk = blockIdx.y, NC = gridDim.x, HG = H / G, c0 = c * kChunk;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  static_assert(NT == 256, "row_col_sums maps 64 rows × 4 parts onto the threads");
  // Row sums rsum_i = Σ_m F1_im and column sums csum_m = Σ_i w_i F1_im (w = β or 1) of the fp32
  // (64, 64) tile F1, four threads per row / column.
  auto row_col_sums = [&](bool weighted) {
    const int r = tid / 4, part = tid % 4;
    float rs = 0.0f, cs = 0.0f;
#pragma unroll
    for (int x = 0; x < 16; ++x) {
      const int i = part * 16 + x;
      rs += F1[r * LDF + i];
      cs += (weighted ? bet[i] : 1.0f) * F1[i * LDF + r];
    }
    rs += __shfl_xor_sync(0xffffffffu, rs, 1);
    rs += __shfl_xor_sync(0xffffffffu, rs, 2);
    cs += __shfl_xor_sync(0xffffffffu, cs, 1);
    cs += __shfl_xor_sync(0xffffffffu, cs, 2);
    if (part == 0) rsum[r] = rs, csum[r] = cs;
  };

  for (int idx = tid; idx < 64 * VPR; idx += NT) {
    const int r = idx / VPR, cv = idx % VPR, n = c0 + r;
    const bool valid = n < N;
    cp_async16(Ks + r * LDB + cv * 8, valid ? k + ((size_t)n * G + hk) * D + cv * 8 : k, valid);
  }
  cp_async_commit();

  // dk, dv of the group's rows summed over its query heads in order, in registers (a global
  // read-modify-write per head waited on every load), written once after the last head.
  float dk_acc[64 * D / NT], dv_acc[64 / NW][D / 32];
  for (int j = 0; j < HG; ++j) {
    const int h = hk * HG + j;
    const size_t crow = ((size_t)h * NC + c) * 64;
    for (int idx = tid; idx < 64 * VPR; idx += NT) {
      const int r = idx / VPR, cv = idx % VPR, n = c0 + r;
      const bool valid = n < N;
      cp_async16(Qs + r * LDB + cv * 8, valid ? q + ((size_t)n * H + h) * D + cv * 8 : q, valid);
      cp_async16(dOs + r * LDB + cv * 8, valid ? dout + ((size_t)n * H + h) * D + cv * 8 : dout,
                 valid);
      cp_async16(Ws + r * LDB + cv * 8, Wg + (crow + r) * D + cv * 8, true);
      cp_async16(Us + r * LDB + cv * 8, Ug + (crow + r) * D + cv * 8, true);
      cp_async16(dUts + r * LDB + cv * 8, dUtg + (crow + r) * D + cv * 8, true);
    }
    const size_t ck_off = ((size_t)h * NC + c) * D * D;
    const float* S0f = static_cast<const float*>(ckS) + ck_off;  // S_0 (D, D) fp32
    const bf16* S0b = static_cast<const bf16*>(ckS) + ck_off;    // S_0ᵀ (D, D) bf16
    if constexpr (CK_BF16) {
      for (int idx = tid; idx < D * VPR; idx += NT) {
        const int r = idx / VPR, cv = idx % VPR;
        cp_async16(S0s + r * LDB + cv * 8, S0b + (size_t)r * D + cv * 8, true);
      }
    } else {
      for (int idx = tid; idx < D * D / 4; idx += NT) {
        const int r = idx / (D / 4), cv = idx % (D / 4);
        const float4 x = *reinterpret_cast<const float4*>(S0f + (size_t)r * D + cv * 4);
        __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(S0s + r * LDB + cv * 4);
        dst[0] = __floats2bfloat162_rn(x.x, x.y);
        dst[1] = __floats2bfloat162_rn(x.z, x.w);
      }
    }
    cp_async_commit();
    if (tid < 64) {
      const int n = c0 + tid;
      gam[tid] = gamma[crow + tid];
      bet[tid] = n < N ? beta[(size_t)n * H + h] : 0.0f;
    }
    float dgam = 0.0f, dbet = 0.0f;  // of row tid (threads < 64)
    cp_async_wait<0>();
    __syncthreads();

    // Ũ = U − W S_0.
    if constexpr (CK_BF16)
      block_mma<false, true, 64, D, D>(Acc, LDA, Ws, LDB, S0s, LDB, false);
    else
      block_mma<false, false, 64, D, D>(Acc, LDA, Ws, LDB, S0s, LDB, false);
    __syncthreads();
    for (int idx = tid; idx < 64 * D / 2; idx += NT) {
      const int r = idx / (D / 2), e = idx % (D / 2) * 2;
      const float2 u =
          __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(Us + r * LDB + e));
      *reinterpret_cast<__nv_bfloat162*>(Uts + r * LDB + e) =
          __floats2bfloat162_rn(u.x - Acc[r * LDA + e], u.y - Acc[r * LDA + e + 1]);
    }
    __syncthreads();
    // Through P: dP = dO Ũᵀ (F1), Q Kᵀ (Acc); e = dP ⊙ P, Z = dP ⊙ e^{γi−γm} (m ≤ i).
    block_mma<false, true, 64, 64, D>(F1, LDF, dOs, LDB, Uts, LDB, false);
    block_mma<false, true, 64, 64, D>(Acc, LDF, Qs, LDB, Ks, LDB, false);
    __syncthreads();
    for (int idx = tid; idx < 64 * 64; idx += NT) {
      const int i = idx / 64, m = idx % 64;
      float e = 0.0f, z = 0.0f;
      if (m <= i) {
        const float dm = expf(gam[i] - gam[m]), dp = F1[i * LDF + m];
        z = dp * dm;
        e = z * Acc[i * LDF + m];
      }
      F1[i * LDF + m] = e;
      Zb[i * LDZ + m] = __float2bfloat16(z);
    }
    __syncthreads();
    row_col_sums(false);
    __syncthreads();
    if (tid < 64) dgam += rsum[tid] - csum[tid];
    // dq = Z K + diag(e^γ) dO S_0ᵀ; dγ_i += e^{γ_i} q_i·(dO S_0ᵀ)_i.
    if constexpr (CK_BF16)
      block_mma<false, false, 64, D, D>(Acc, LDA, dOs, LDB, S0s, LDB, false);
    else
      block_mma<false, true, 64, D, D>(Acc, LDA, dOs, LDB, S0s, LDB, false);
    __syncthreads();
    for (int i = warp; i < 64; i += NW) {
      const float eg = expf(gam[i]);
      float part = 0.0f;
      for (int d = lane; d < D; d += 32) {
        const float a = Acc[i * LDA + d];
        part += a * __bfloat162float(Qs[i * LDB + d]);
        Acc[i * LDA + d] = a * eg;
      }
      part = device::warp_sum(part);
      if (lane == 0) red[i] = eg * part;
    }
    __syncthreads();
    if (tid < 64) dgam += red[tid];
    block_mma<false, false, 64, D, 64>(Acc, LDA, Zb, LDZ, Ks, LDB, true);
    __syncthreads();
    for (int idx = tid; idx < 64 * D / 4; idx += NT) {
      const int r = idx / (D / 4), cv = idx % (D / 4), n = c0 + r;
      if (n < N)
        *reinterpret_cast<float4*>(dq + ((size_t)n * H + h) * D + cv * 4) =
            *reinterpret_cast<const float4*>(Acc + r * LDA + cv * 4);
    }
    __syncthreads();
    // dW = −dŨ S_0ᵀ (into the dO slot).
    if constexpr (CK_BF16)
      block_mma<false, false, 64, D, D>(Acc, LDA, dUts, LDB, S0s, LDB, false);
    else
      block_mma<false, true, 64, D, D>(Acc, LDA, dUts, LDB, S0s, LDB, false);
    __syncthreads();
    for (int idx = tid; idx < 64 * D / 2; idx += NT) {
      const int r = idx / (D / 2), e = idx % (D / 2) * 2;
      *reinterpret_cast<__nv_bfloat162*>(dOs + r * LDB + e) =
          __floats2bfloat162_rn(-Acc[r * LDA + e], -Acc[r * LDA + e + 1]);
    }
    __syncthreads();
    // dSᵀ of the state leaving the chunk over S_0; dγ_63 += e^{γ_63} ⟨dS, S_0⟩.
    const bf16* dSg = ckdS + ((size_t)h * NC + c) * D * D;
    float part = 0.0f;
    if constexpr (CK_BF16) {  // S_0ᵀ in smem has the layout of dSᵀ: dot first, then overwrite
      // 8 elements (16 bytes) a load, every load of a thread in flight at once (one bf16 a load
      // waited on each: the kernel's top stall in Nsight Compute, session 14).
      static_assert(D * D / 8 % NT == 0, "the dS dot's 16-byte steps divide among the threads");
#pragma unroll
      for (int x = 0; x < D * D / 8 / NT; ++x) {
        const int idx = tid + x * NT, e = idx / (D / 8), d0 = idx % (D / 8) * 8;
        const uint4 gs = *reinterpret_cast<const uint4*>(dSg + (size_t)idx * 8);
        const uint4 ss = *reinterpret_cast<const uint4*>(S0s + e * LDB + d0);
        const uint32_t gw[4] = {gs.x, gs.y, gs.z, gs.w}, sw[4] = {ss.x, ss.y, ss.z, ss.w};
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&sw[w]));
          const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&gw[w]));
          part += a.x * b.x + a.y * b.y;
        }
      }
      part = device::block_sum(part, bred);  // its barriers also end the reads of S0s
    }
    for (int idx = tid; idx < D * VPR; idx += NT) {
      const int r = idx / VPR, cv = idx % VPR;
      cp_async16(S0s + r * LDB + cv * 8, dSg + (size_t)r * D + cv * 8, true);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    if constexpr (!CK_BF16) {
      for (int idx = tid; idx < D * D; idx += NT) {
        const int d = idx / D, e = idx % D;
        part += S0f[idx] * __bfloat162float(S0s[e * LDB + d]);
      }
      part = device::block_sum(part, bred);
    }
    if (tid == 63) dgam += expf(gam[63]) * part;
    // dK̄ = Ũ dSᵀ: dk_m += e^{γ63−γm} dK̄_m, dγ_63 += t_m, dγ_m −= t_m
    // (t_m = e^{γ63−γm} k_m·dK̄_m).
    block_mma<false, false, 64, D, D>(Acc, LDA, Uts, LDB, S0s, LDB, false);
    __syncthreads();
    for (int m = warp; m < 64; m += NW) {
      const float dec = expf(gam[63] - gam[m]);
      float p = 0.0f;
      for (int d = lane; d < D; d += 32) {
        const float a = Acc[m * LDA + d];
        p += a * __bfloat162float(Ks[m * LDB + d]);
        DK[m * LDA + d] = dec * a;
      }
      p = device::warp_sum(p);
      if (lane == 0) red[m] = dec * p;
    }
    __syncthreads();
    if (tid < 64) {
      dgam -= red[tid];
      if (warp == 1) {  // dγ_63 += Σ_m t_m
        const float s = device::warp_sum(red[lane] + red[32 + lane]);
        if (tid == 63) dgam += s;
      }
    }
    // dk += Zᵀ Q.
    block_mma<true, false, 64, D, 64>(DK, LDA, Zb, LDZ, Qs, LDB, true);
    // T into F1's slot.
    for (int idx = tid; idx < 64 * 8; idx += NT) {
      const int r = idx / 8, cv = idx % 8;
      cp_async16(Tb + r * LDZ + cv * 8, Tg + (crow + r) * 64 + cv * 8, true);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    // dβV = Tᵀ dU (dU = dŨ): dv += β dβV, dβ += dβV·v.
    block_mma<true, false, 64, D, 64>(Acc, LDA, Tb, LDZ, dUts, LDB, false);
    __syncthreads();
#pragma unroll
    for (int x = 0; x < 64 / NW; ++x) {
      const int i = warp + x * NW, n = c0 + i;
      const float b = bet[i];
      float p = 0.0f;
#pragma unroll
      for (int y = 0; y < D / 32; ++y) {
        const int e = lane + 32 * y;
        const float a = Acc[i * LDA + e];
        Uts[i * LDB + e] = __float2bfloat16(a);
        dv_acc[x][y] = (j == 0 ? 0.0f : dv_acc[x][y]) + b * a;
        if (n < N) p += a * __bfloat162float(v[((size_t)n * G + hk) * D + e]);
      }
      p = device::warp_sum(p);
      if (lane == 0) red[i] = p;
    }
    __syncthreads();
    if (tid < 64) dbet += red[tid];
    // dβe^γK = Tᵀ dW: dk += β e^γ (·), dβ += e^γ (·)·k, dγ += β e^γ (·)·k.
    block_mma<true, false, 64, D, 64>(Acc, LDA, Tb, LDZ, dOs, LDB, false);
    __syncthreads();
    for (int i = warp; i < 64; i += NW) {
      const float bd = bet[i] * expf(gam[i]);
      float p = 0.0f;
      for (int e = lane; e < D; e += 32) {
        const float a = Acc[i * LDA + e];
        dUts[i * LDB + e] = __float2bfloat16(a);
        p += a * __bfloat162float(Ks[i * LDB + e]);
        DK[i * LDA + e] += bd * a;
      }
      p = device::warp_sum(p);
      if (lane == 0) red[i] = p;
    }
    __syncthreads();
    if (tid < 64) {
      const float eg = expf(gam[tid]);
      dbet += eg * red[tid];
      dgam += bet[tid] * eg * red[tid];
    }
    // dA = −(dβV) Uᵀ − (dβe^γK) Wᵀ; through A_im = β_i e^{γi−γm} k_iᵀk_m (m < i).
    block_mma<false, true, 64, 64, D>(F1, LDF, Uts, LDB, Us, LDB, false, dUts, LDB, Ws, LDB);
    block_mma<false, true, 64, 64, D>(Acc, LDF, Ks, LDB, Ks, LDB, false);
    __syncthreads();
    // G_im = dA_im e^{γi−γm} k_iᵀk_m into F1; Z + Zᵀ (Z_im = β_i dA_im e^{γi−γm}) into Zb: the
    // gradient of k_iᵀk_m reaches dk as (Z + Zᵀ) K.
    for (int idx = tid; idx < 64 * 64; idx += NT) {
      const int i = idx / 64, m = idx % 64;
      float gv = 0.0f;
      if (m < i) {
        const float z = -F1[i * LDF + m] * expf(gam[i] - gam[m]);
        gv = z * Acc[i * LDF + m];
        const bf16 zb = __float2bfloat16(z * bet[i]);
        Zb[i * LDZ + m] = zb;
        Zb[m * LDZ + i] = zb;
      } else if (m == i) {
        Zb[i * LDZ + i] = __float2bfloat16(0.0f);
      }
      F1[i * LDF + m] = gv;
    }
    __syncthreads();
    row_col_sums(true);
    __syncthreads();
    if (tid < 64) {
      dbet += rsum[tid];
      dgam += bet[tid] * rsum[tid] - csum[tid];
    }
    // dk += (Z + Zᵀ) K.
    block_mma<false, false, 64, D, 64>(DK, LDA, Zb, LDZ, Ks, LDB, true);
    __syncthreads();
#pragma unroll
    for (int x = 0; x < 64 * D / NT; ++x) {
      const int idx = tid + x * NT;
      dk_acc[x] = (j == 0 ? 0.0f : dk_acc[x]) + DK[idx / D * LDA + idx % D];
    }
    if (tid < 64) red[tid] = dgam;
    __syncthreads();
    if (tid < 64) {  // dg_m = Σ_{i ≥ m} dγ_i: suffix scan per warp, warp 0 adds warp 1's total
      float s = dgam;
#pragma unroll
      for (int off = 1; off < 32; off <<= 1) {
        const float y = __shfl_down_sync(0xffffffffu, s, off);
        if (lane + off < 32) s += y;
      }
      if (warp == 0) s += device::warp_sum(red[32 + lane]);
      const int n = c0 + tid;
      if (n < N) {
        dg[(size_t)n * H + h] = s;
        dbeta[(size_t)n * H + h] = dbet;
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int x = 0; x < 64 * D / NT; ++x) {
    const int idx = tid + x * NT, r = idx / D, n = c0 + r;
    if (n < N) dk[((size_t)n * G + hk) * D + idx % D] = dk_acc[x];
  }
#pragma unroll
  for (int x = 0; x < 64 / NW; ++x) {
    const int n = c0 + warp + x * NW;
#pragma unroll
    for (int y = 0; y < D / 32; ++y)
      if (n < N) dv[((size_t)n * G + hk) * D + lane + 32 * y] = dv_acc[x][y];
  }
}

template <int D, int BV>
Status launch_reverse_pass(bf16* dS, bf16* dUt, const bf16* dout, const bf16* q, const bf16* k,
                           const ForwardWorkspace& ws, int N, int H, int G, cudaStream_t stream) {
  using L = StateLayout<D, BV>;
  auto kernel = gdn_reverse_pass_kernel<D, BV>;
  GL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)L::total));
  kernel<<<dim3(D / BV, H), L::NW * 32, L::total, stream>>>(dS, dUt, dout, q, k, ws.W, ws.P,
                                                            ws.gamma, N, H, G);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

// Where the backward's scratch lives: the forward's, then T, the state checkpoints (fp32), the
// dS checkpoints (bf16, transposed), dŨ and the forward's output (unused).
struct BackwardWorkspace {
  ForwardWorkspace fwd;
  bf16* T;
  float* ckS;
  bf16* ckdS;
  bf16* dUt;
  bf16* o;
  size_t bytes;
};
BackwardWorkspace backward_workspace(void* base, int N, int H, int D) {
  const size_t NC = (N + kChunk - 1) / kChunk;
  BackwardWorkspace w{};
  w.fwd = forward_workspace(base, N, H, D);
  char* p = static_cast<char*>(base);
  size_t off = w.fwd.bytes;
  w.T = reinterpret_cast<bf16*>(p + off), off += align_up(H * NC * 64 * 64 * sizeof(bf16));
  w.ckS = reinterpret_cast<float*>(p + off), off += align_up(H * NC * D * D * sizeof(float));
  w.ckdS = reinterpret_cast<bf16*>(p + off), off += align_up(H * NC * D * D * sizeof(bf16));
  w.dUt = reinterpret_cast<bf16*>(p + off), off += align_up(H * NC * 64 * D * sizeof(bf16));
  w.o = reinterpret_cast<bf16*>(p + off), off += align_up((size_t)N * H * D * sizeof(bf16));
  w.bytes = off;
  return w;
}

// Step 1: the forward keeping the chunks' entering states and T in the backward's workspace.
// Defaults (0): 32 value columns per block in both sequential passes, the fastest on H200 at
// H = 32, D = 128 (fwd+bwd 11.7 ms at T = 32K vs 12.2 with 64; 128 blocks fill the SMs).
template <int D>
Status forward_for_backward(bf16* o, const bf16* q, const bf16* k, const bf16* v, const float* g,
                            const float* beta, int N, int H, int G, const BackwardWorkspace& ws,
                            cudaStream_t stream, const GatedDeltaBackwardOptions& opt) {
  return chunked_forward<D>(o, nullptr, nullptr, q, k, v, g, beta, N, H, G, ws.fwd, stream, ws.ckS,
                            opt.value_block == 0 ? 32 : opt.value_block, ws.T,
                            opt.bf16_checkpoints);
}

template <int D>
Status chunked_backward(float* dq, float* dk, float* dv, float* dg, float* dbeta, const bf16* dout,
                        const bf16* q, const bf16* k, const bf16* v, const float* g,
                        const float* beta, int N, int H, int G, const BackwardWorkspace& ws,
                        cudaStream_t stream, const GatedDeltaBackwardOptions& opt) {
  const int NC = (N + kChunk - 1) / kChunk;
  if (!opt.forward_kept)
    GL_TRY(forward_for_backward<D>(ws.o, q, k, v, g, beta, N, H, G, ws, stream, opt));
  const int rvb = opt.reverse_value_block;
  auto reverse_pass = [&]() -> Status {
    switch (rvb == 0 ? 32 : rvb) {
      case 16:
        return launch_reverse_pass<D, 16>(ws.ckdS, ws.dUt, dout, q, k, ws.fwd, N, H, G, stream);
      case 32:
        return launch_reverse_pass<D, 32>(ws.ckdS, ws.dUt, dout, q, k, ws.fwd, N, H, G, stream);
      case 64:
        return launch_reverse_pass<D, 64>(ws.ckdS, ws.dUt, dout, q, k, ws.fwd, N, H, G, stream);
      case 128:
        if constexpr (D == 128)
          return launch_reverse_pass<D, 128>(ws.ckdS, ws.dUt, dout, q, k, ws.fwd, N, H, G, stream);
        [[fallthrough]];
      default:
        return make_error("gated_delta_backward: reverse_value_block ", rvb,
                          " unsupported (16, 32, 64, 128 ≤ head dim)");
    }
  };
  GL_TRY(reverse_pass());
  using L = GradLayout<D>;
  auto grad =
      opt.bf16_checkpoints ? gdn_chunk_grad_kernel<D, true> : gdn_chunk_grad_kernel<D, false>;
  GL_CUDA_CHECK(cudaFuncSetAttribute(grad, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)L::total));
  grad<<<dim3(NC, G), kGradThreads, L::total, stream>>>(dq, dk, dv, dg, dbeta, dout, q, k, v, beta,
                                                        ws.fwd.W, ws.fwd.U, ws.T, ws.fwd.gamma,
                                                        ws.ckS, ws.ckdS, ws.dUt, N, H, G);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
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
                                   float* checkpoints, int value_block,
                                   const GatedDeltaForwardOptions& options) {
  GL_TRY(check_shapes("gated_delta_chunked_forward", N, H, G));
  if (options.segments < 0)
    return make_error("gated_delta_chunked_forward: segments ", options.segments,
                      " (0: automatic, else ≥ 1)");
  if (options.wait_groups < 0)
    return make_error("gated_delta_chunked_forward: wait_groups ", options.wait_groups,
                      " (0: automatic, else ≥ 1)");
  const ForwardWorkspace ws = forward_workspace(workspace, N, H, D);
  if (workspace_bytes < ws.bytes)
    return make_error("gated_delta_chunked_forward: workspace of ", workspace_bytes,
                      " bytes, needs ", ws.bytes);
  return dispatch_head_dim(D, [&](auto d) {
    return chunked_forward<decltype(d)::value>(o, state_final, state_init, q, k, v, g, beta, N, H,
                                               G, ws, stream, checkpoints, value_block,
                                               nullptr, false, options);
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
  return backward_workspace(nullptr, N, H, D).bytes;
}

Status gated_delta_forward_for_backward(bf16* o, const bf16* q, const bf16* k, const bf16* v,
                                        const float* g, const float* beta, int N, int H, int G,
                                        int D, void* workspace, size_t workspace_bytes,
                                        cudaStream_t stream,
                                        const GatedDeltaBackwardOptions& options) {
  GL_TRY(check_shapes("gated_delta_forward_for_backward", N, H, G));
  const BackwardWorkspace ws = backward_workspace(workspace, N, H, D);
  if (workspace_bytes < ws.bytes)
    return make_error("gated_delta_forward_for_backward: workspace of ", workspace_bytes,
                      " bytes, needs ", ws.bytes);
  return dispatch_head_dim(D, [&](auto d) {
    return forward_for_backward<decltype(d)::value>(o, q, k, v, g, beta, N, H, G, ws, stream,
                                                    options);
  });
}

Status gated_delta_backward(float* dq, float* dk, float* dv, float* dg, float* dbeta,
                            const bf16* dout, const bf16* q, const bf16* k, const bf16* v,
                            const float* g, const float* beta, int N, int H, int G, int D,
                            void* workspace, size_t workspace_bytes, cudaStream_t stream,
                            const GatedDeltaBackwardOptions& options) {
  GL_TRY(check_shapes("gated_delta_backward", N, H, G));
  const BackwardWorkspace ws = backward_workspace(workspace, N, H, D);
  if (workspace_bytes < ws.bytes)
    return make_error("gated_delta_backward: workspace of ", workspace_bytes, " bytes, needs ",
                      ws.bytes);
  return dispatch_head_dim(D, [&](auto d) {
    return chunked_backward<decltype(d)::value>(dq, dk, dv, dg, dbeta, dout, q, k, v, g, beta, N,
                                                H, G, ws, stream, options);
  });
}

}  // namespace golinear::kernels::cuda
