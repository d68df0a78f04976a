// Gated DeltaNet on the GPU (see gated_delta.h for the math and the two-kernel chunked scheme).
// Tensor-core tiles are wmma m16n16k16 (bf16 operands, fp32 accumulators) read from shared
// memory; every shared-memory row is padded by 16 bytes against bank conflicts.
#include "kernels/cuda/gated_delta.h"

#include <mma.h>

#include <algorithm>

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

// grid (NC, H), 128 threads. Writes W, U (64, D), P (64, 64) and γ (64) of chunk c, head h.
template <int D>
__global__ void __launch_bounds__(128) gdn_prepare_kernel(bf16* __restrict__ W_out,
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

  for (int idx = tid; idx < 64 * VPR; idx += 128) {
    const int r = idx / VPR, cv = idx % VPR, n = c0 + r;
    uint4 zq{0, 0, 0, 0}, zk{0, 0, 0, 0}, zv{0, 0, 0, 0};
    if (n < N) {
      zq = *reinterpret_cast<const uint4*>(q + ((size_t)n * H + h) * D + cv * 8);
      zk = *reinterpret_cast<const uint4*>(k + ((size_t)n * G + hk) * D + cv * 8);
      zv = *reinterpret_cast<const uint4*>(v + ((size_t)n * G + hk) * D + cv * 8);
    }
    *reinterpret_cast<uint4*>(Qs + r * LDB + cv * 8) = zq;
    *reinterpret_cast<uint4*>(Ks + r * LDB + cv * 8) = zk;
    *reinterpret_cast<uint4*>(Vs + r * LDB + cv * 8) = zv;
  }
  if (tid < 64) {
    const int n = c0 + tid;
    gam[tid] = n < N ? g[(size_t)n * H + h] : 0.0f;  // padded rows: no decay, no update
    bet[tid] = n < N ? beta[(size_t)n * H + h] : 0.0f;
  }
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
  for (int t = warp; t < 20; t += 4) {
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
  for (int idx = tid; idx < 64 * 64; idx += 128) {
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

  if (tid < 64) {
    // T = (I + A)⁻¹ by forward substitution, column j per thread, into F2 (fp32):
    // T_jj = 1, T_ij = −Σ_{j≤m<i} A_im T_mj. Loops are uniform so A_im is a broadcast read.
    const int j = tid;
    for (int i = 0; i < 64; ++i) F2[i * LDF + j] = i == j ? 1.0f : 0.0f;
    for (int i = 1; i < 64; ++i) {
      float s = 0.0f;
      for (int m = 0; m < i; ++m) s -= F1[i * LDF + m] * F2[m * LDF + j];
      if (i > j) F2[i * LDF + j] = s;
    }
  } else {
    // Meanwhile the other two warps scale K by β e^γ and V by β, in place.
    for (int idx = tid - 64; idx < 64 * D; idx += 64) {
      const int r = idx / D, d = idx % D;
      const float b = bet[r];
      Ks[r * LDB + d] = __float2bfloat16(b * expf(gam[r]) * __bfloat162float(Ks[r * LDB + d]));
      Vs[r * LDB + d] = __float2bfloat16(b * __bfloat162float(Vs[r * LDB + d]));
    }
  }
  __syncthreads();
  for (int idx = tid; idx < 64 * 64; idx += 128) {
    const int i = idx / 64, m = idx % 64;
    Tb[i * LDT + m] = __float2bfloat16(F2[i * LDF + m]);
  }
  __syncthreads();

  // W = T (βe^γ K), U = T (β V); T is lower triangular, so row tile i needs k tiles ≤ i.
  constexpr int CT = D / 16;
  for (int which = 0; which < 2; ++which) {
    const bf16* B = which == 0 ? Ks : Vs;
    for (int t = warp; t < 4 * CT; t += 4) {
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
    for (int idx = tid; idx < 64 * VPR; idx += 128) {
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

template <int D, int BV>
struct StateLayout {
  static constexpr int LDB = D + 8, LDP = 64 + 8, LDU = BV + 8, LDF = BV + 4;
  // One pipeline stage: W, Q, K (64, D), P (64, 64), U slice (64, BV), γ (64).
  static constexpr size_t w = 0;
  static constexpr size_t q = w + 64 * LDB * 2;
  static constexpr size_t k = q + 64 * LDB * 2;
  static constexpr size_t p = k + 64 * LDB * 2;
  static constexpr size_t u = p + 64 * LDP * 2;
  static constexpr size_t gm = u + 64 * LDU * 2;
  static constexpr size_t stage_bytes = (gm + 64 * 4 + 127) / 128 * 128;
  static constexpr size_t sf = 2 * stage_bytes;          // S slice fp32 (D, BV)
  static constexpr size_t sb = sf + D * LDF * 4;          // S slice bf16 (D, BV)
  static constexpr size_t x1 = sb + D * LDU * 2;          // fp32 (64, BV)
  static constexpr size_t x2 = x1 + 64 * LDF * 4;         // fp32 (64, BV)
  static constexpr size_t ub = x2 + 64 * LDF * 4;         // ũ bf16 (64, BV)
  static constexpr size_t udb = ub + 64 * LDU * 2;        // e^{γL−γ} ũ bf16 (64, BV)
  static constexpr size_t total = udb + 64 * LDU * 2;
};

// grid (D / BV, H), 128 threads: head h, value columns [slice·BV, slice·BV + BV).
template <int D, int BV>
__global__ void __launch_bounds__(128) gdn_state_pass_kernel(
    bf16* __restrict__ o, float* __restrict__ state_final, const float* __restrict__ state_init,
    float* __restrict__ checkpoints, const bf16* __restrict__ q, const bf16* __restrict__ k,
    const bf16* __restrict__ W, const bf16* __restrict__ U, const bf16* __restrict__ P,
    const float* __restrict__ gamma, int N, int H, int G) {
  using L = StateLayout<D, BV>;
  constexpr int LDB = L::LDB, LDP = L::LDP, LDU = L::LDU, LDF = L::LDF;
  constexpr int VPR = D / 8, CT = BV / 16;
  extern __shared__ __align__(128) unsigned char smem[];
  float* Sf = reinterpret_cast<float*>(smem + L::sf);
  bf16* Sb = reinterpret_cast<bf16*>(smem + L::sb);
  float* X1 = reinterpret_cast<float*>(smem + L::x1);
  float* X2 = reinterpret_cast<float*>(smem + L::x2);
  bf16* ub = reinterpret_cast<bf16*>(smem + L::ub);
  bf16* udb = reinterpret_cast<bf16*>(smem + L::udb);

  const int slice = blockIdx.x, h = blockIdx.y, col0 = slice * BV;
  const int NC = (N + kChunk - 1) / kChunk, hk = h / (H / G);
  const int tid = threadIdx.x, warp = tid / 32;

  for (int idx = tid; idx < D * BV; idx += 128) {
    const int d = idx / BV, e = idx % BV;
    const float s = state_init ? state_init[((size_t)h * D + d) * D + col0 + e] : 0.0f;
    Sf[d * LDF + e] = s;
    Sb[d * LDU + e] = __float2bfloat16(s);
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
    for (int idx = tid; idx < 64 * VPR; idx += 128) {
      const int r = idx / VPR, cv = idx % VPR, n = c0 + r;
      const bool valid = n < N;
      cp_async16(Ws + r * LDB + cv * 8, W + (chunk_row + r) * D + cv * 8, true);
      cp_async16(Qs + r * LDB + cv * 8, valid ? q + ((size_t)n * H + h) * D + cv * 8 : q, valid);
      cp_async16(Ks + r * LDB + cv * 8, valid ? k + ((size_t)n * G + hk) * D + cv * 8 : k, valid);
    }
    for (int idx = tid; idx < 64 * 8; idx += 128) {
      const int r = idx / 8, cv = idx % 8;
      cp_async16(Ps + r * LDP + cv * 8, P + (chunk_row + r) * 64 + cv * 8, true);
    }
    for (int idx = tid; idx < 64 * (BV / 8); idx += 128) {
      const int r = idx / (BV / 8), cv = idx % (BV / 8);
      cp_async16(Us + r * LDU + cv * 8, U + (chunk_row + r) * D + col0 + cv * 8, true);
    }
    if (tid < 16) cp_async16(gs + tid * 4, gamma + chunk_row + tid * 4, true);
  };

  load_stage(0, 0);
  cp_async_commit();
  for (int c = 0; c < NC; ++c) {
    if (c + 1 < NC) load_stage(c + 1, (c + 1) & 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    unsigned char* base = smem + (c & 1) * L::stage_bytes;
    const bf16* Ws = reinterpret_cast<const bf16*>(base + L::w);
    const bf16* Qs = reinterpret_cast<const bf16*>(base + L::q);
    const bf16* Ks = reinterpret_cast<const bf16*>(base + L::k);
    const bf16* Ps = reinterpret_cast<const bf16*>(base + L::p);
    const bf16* Us = reinterpret_cast<const bf16*>(base + L::u);
    const float* gs = reinterpret_cast<const float*>(base + L::gm);

    if (checkpoints) {
      float* cp = checkpoints + ((size_t)h * NC + c) * D * D;
      for (int idx = tid; idx < D * BV; idx += 128) {
        const int d = idx / BV, e = idx % BV;
        cp[(size_t)d * D + col0 + e] = Sf[d * LDF + e];
      }
    }
    // (A) X1 = W S, X2 = Q S.
    for (int t = warp; t < 2 * 4 * CT; t += 4) {
      const int which = t / (4 * CT), tt = t % (4 * CT), i = tt / CT, j = tt % CT;
      const bf16* A = which == 0 ? Ws : Qs;
      FragC acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        FragA a;
        FragB b;
        wmma::load_matrix_sync(a, A + i * 16 * LDB + kk * 16, LDB);
        wmma::load_matrix_sync(b, Sb + kk * 16 * LDU + j * 16, LDU);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync((which == 0 ? X1 : X2) + i * 16 * LDF + j * 16, acc, LDF,
                              wmma::mem_row_major);
    }
    __syncthreads();
    // (B) ũ = U − W S; its decayed copy for the state update; S ← e^{γL} S.
    const float gl = gs[63];
    for (int idx = tid; idx < 64 * BV; idx += 128) {
      const int r = idx / BV, e = idx % BV;
      const float u = __bfloat162float(Us[r * LDU + e]) - X1[r * LDF + e];
      ub[r * LDU + e] = __float2bfloat16(u);
      udb[r * LDU + e] = __float2bfloat16(expf(gl - gs[r]) * u);
    }
    const float decay_last = expf(gl);
    for (int idx = tid; idx < D * BV; idx += 128) {
      const int d = idx / BV, e = idx % BV;
      Sf[d * LDF + e] *= decay_last;
    }
    __syncthreads();
    // (C) X1 = P ũ (intra-chunk part of o); S += Kᵀ (e^{γL−γ} ũ).
    for (int t = warp; t < 4 * CT + (D / 16) * CT; t += 4) {
      FragC acc;
      if (t < 4 * CT) {
        const int i = t / CT, j = t % CT;
        wmma::fill_fragment(acc, 0.0f);
        for (int kk = 0; kk <= i; ++kk) {
          FragA a;
          FragB b;
          wmma::load_matrix_sync(a, Ps + i * 16 * LDP + kk * 16, LDP);
          wmma::load_matrix_sync(b, ub + kk * 16 * LDU + j * 16, LDU);
          wmma::mma_sync(acc, a, b, acc);
        }
        wmma::store_matrix_sync(X1 + i * 16 * LDF + j * 16, acc, LDF, wmma::mem_row_major);
      } else {
        const int tt = t - 4 * CT, i = tt / CT, j = tt % CT;
        wmma::load_matrix_sync(acc, Sf + i * 16 * LDF + j * 16, LDF, wmma::mem_row_major);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          FragAT a;  // Kᵀ: element (d, m) = K[m][d]
          FragB b;
          wmma::load_matrix_sync(a, Ks + kk * 16 * LDB + i * 16, LDB);
          wmma::load_matrix_sync(b, udb + kk * 16 * LDU + j * 16, LDU);
          wmma::mma_sync(acc, a, b, acc);
        }
        wmma::store_matrix_sync(Sf + i * 16 * LDF + j * 16, acc, LDF, wmma::mem_row_major);
      }
    }
    __syncthreads();
    // (D) o = e^γ (Q S) + P ũ; refresh the bf16 copy of S.
    const int c0 = c * kChunk;
    for (int idx = tid; idx < 64 * BV / 2; idx += 128) {
      const int r = (2 * idx) / BV, e = (2 * idx) % BV, n = c0 + r;
      if (n < N) {
        const float scale = expf(gs[r]);
        const float a = scale * X2[r * LDF + e] + X1[r * LDF + e];
        const float b = scale * X2[r * LDF + e + 1] + X1[r * LDF + e + 1];
        *reinterpret_cast<__nv_bfloat162*>(o + ((size_t)n * H + h) * D + col0 + e) =
            __floats2bfloat162_rn(a, b);
      }
    }
    for (int idx = tid; idx < D * BV; idx += 128) {
      const int d = idx / BV, e = idx % BV;
      Sb[d * LDU + e] = __float2bfloat16(Sf[d * LDF + e]);
    }
    __syncthreads();
  }
  if (state_final) {
    for (int idx = tid; idx < D * BV; idx += 128) {
      const int d = idx / BV, e = idx % BV;
      state_final[((size_t)h * D + d) * D + col0 + e] = Sf[d * LDF + e];
    }
  }
}

template <int D, int BV>
Status launch_state_pass(bf16* o, float* state_final, const float* state_init, float* checkpoints,
                         const bf16* q, const bf16* k, const ForwardWorkspace& ws, const float*,
                         int N, int H, int G, cudaStream_t stream) {
  using L = StateLayout<D, BV>;
  auto kernel = gdn_state_pass_kernel<D, BV>;
  GL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)L::total));
  kernel<<<dim3(D / BV, H), 128, L::total, stream>>>(o, state_final, state_init, checkpoints, q, k,
                                                     ws.W, ws.U, ws.P, ws.gamma, N, H, G);
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
  prepare<<<dim3(NC, H), 128, L::total, stream>>>(ws.W, ws.U, ws.P, ws.gamma, q, k, v, g, beta,
                                                  N, H, G);
  GL_CUDA_CHECK_LAUNCH();
  switch (value_block == 0 ? 32 : value_block) {
    case 16:
      return launch_state_pass<D, 16>(o, state_final, state_init, checkpoints, q, k, ws, g, N, H,
                                      G, stream);
    case 32:
      return launch_state_pass<D, 32>(o, state_final, state_init, checkpoints, q, k, ws, g, N, H,
                                      G, stream);
    case 64:
      return launch_state_pass<D, 64>(o, state_final, state_init, checkpoints, q, k, ws, g, N, H,
                                      G, stream);
    default:
      return make_error("gated_delta_chunked_forward: value_block ", value_block,
                        " unsupported (16, 32, 64)");
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
