// Flash-style masked causal attention and KV-cache decode attention (see attention.h).
#include "kernels/cuda/attention.h"

#include <mma.h>

#include <cmath>

#include "kernels/cuda/device_utils.cuh"

namespace golinear::kernels::cuda {

namespace {

using namespace nvcuda;
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBT = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

constexpr int kTile = 64;
constexpr float kLog2e = 1.4426950408889634f;

template <int D>
struct FlashLayout {
  static constexpr int LDB = D + 8, LDS = 64 + 4, LDP = 64 + 8, LDO = D + 4;
  static constexpr size_t q = 0;
  static constexpr size_t k = q + kTile * LDB * 2;
  static constexpr size_t v = k + kTile * LDB * 2;
  static constexpr size_t s = v + kTile * LDB * 2;      // scores fp32 (64, 64)
  static constexpr size_t p = s + kTile * LDS * 4;      // probabilities bf16 (64, 64)
  static constexpr size_t o = p + kTile * LDP * 2;      // output accumulator fp32 (64, D)
  static constexpr size_t m = o + kTile * LDO * 4;      // running max (64)
  static constexpr size_t l = m + kTile * 4;            // running sum (64)
  static constexpr size_t total = l + kTile * 4;
};

// grid (⌈T/64⌉, H), 128 threads; warp w owns query rows [16w, 16w + 16) of the tile.
template <int D>
__global__ void __launch_bounds__(128) flash_forward_kernel(bf16* __restrict__ y,
                                                            float* __restrict__ lse,
                                                            const bf16* __restrict__ q,
                                                            const bf16* __restrict__ k,
                                                            const bf16* __restrict__ v, int T,
                                                            int H, int G, int sinks, int window) {
  using L = FlashLayout<D>;
  constexpr int LDB = L::LDB, LDS = L::LDS, LDP = L::LDP, LDO = L::LDO, VPR = D / 8;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* Qs = reinterpret_cast<bf16*>(smem + L::q);
  bf16* Ks = reinterpret_cast<bf16*>(smem + L::k);
  bf16* Vs = reinterpret_cast<bf16*>(smem + L::v);
  float* Ss = reinterpret_cast<float*>(smem + L::s);
  bf16* Ps = reinterpret_cast<bf16*>(smem + L::p);
  float* Os = reinterpret_cast<float*>(smem + L::o);
  float* ms = reinterpret_cast<float*>(smem + L::m);
  float* ls = reinterpret_cast<float*>(smem + L::l);

  const int qt = blockIdx.x, h = blockIdx.y, hk = h / (H / G), t0 = qt * kTile;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const float scale = kLog2e / sqrtf((float)D);

  // Row copies all in flight (cp.async, zero-filled past T); waited for with the first K/V tile.
#pragma unroll
  for (int it = 0; it < kTile * VPR / 128; ++it) {
    const int idx = tid + it * 128, r = idx / VPR, cv = idx % VPR, t = t0 + r;
    device::cp_async16(Qs + r * LDB + cv * 8, t < T ? q + ((size_t)t * H + h) * D + cv * 8 : q, t < T);
  }
  device::cp_async_commit();
  for (int idx = tid; idx < kTile * LDO; idx += 128) Os[idx] = 0.0f;
  if (tid < kTile) {
    ms[tid] = -1e30f;
    ls[tid] = 0.0f;
  }
  const int t_last = min(t0 + kTile - 1, T - 1);
  for (int kb = 0; kb * kTile <= t_last; ++kb) {
    const int j0 = kb * kTile;
    if (window >= 0) {  // skip blocks holding neither sinks nor keys inside any query's window
      const bool has_sink = j0 < sinks;
      const bool in_window = j0 + kTile - 1 > t0 - window;
      if (!has_sink && !in_window) continue;
    }
    __syncthreads();  // previous block's K, V, P no longer read
#pragma unroll
    for (int it = 0; it < kTile * VPR / 128; ++it) {
      const int idx = tid + it * 128, r = idx / VPR, cv = idx % VPR, j = j0 + r;
      const bool ok = j < T;
      device::cp_async16(Ks + r * LDB + cv * 8, ok ? k + ((size_t)j * G + hk) * D + cv * 8 : k, ok);
      device::cp_async16(Vs + r * LDB + cv * 8, ok ? v + ((size_t)j * G + hk) * D + cv * 8 : v, ok);
    }
    device::cp_async_commit();
    device::cp_async_wait<0>();
    __syncthreads();
    // S (16 rows of this warp × 64 keys) = Q Kᵀ.
    for (int j = 0; j < 4; ++j) {
      FragC acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        FragA a;
        FragBT b;
        wmma::load_matrix_sync(a, Qs + warp * 16 * LDB + kk * 16, LDB);
        wmma::load_matrix_sync(b, Ks + j * 16 * LDB + kk * 16, LDB);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(Ss + warp * 16 * LDS + j * 16, acc, LDS, wmma::mem_row_major);
    }
    __syncwarp();
    // Online softmax: two lanes per row, 32 keys each.
    {
      const int r = warp * 16 + lane / 2, half = lane % 2, t = t0 + r;
      float* srow = Ss + r * LDS + half * 32;
      float mx = -INFINITY;
      for (int x = 0; x < 32; ++x) {
        const int j = j0 + half * 32 + x;
        bool ok = j <= t && j < T;
        if (ok && window >= 0) ok = j < sinks || j > t - window;
        const float sv = ok ? srow[x] * scale : -INFINITY;
        srow[x] = sv;
        mx = fmaxf(mx, sv);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      const float m_old = ms[r], m_new = fmaxf(m_old, mx);
      float sum = 0.0f;
      bf16* prow = Ps + r * LDP + half * 32;
      for (int x = 0; x < 32; ++x) {
        const float p = exp2f(srow[x] - m_new);
        sum += p;
        prow[x] = __float2bfloat16(p);
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      const float correction = exp2f(m_old - m_new);
      float* orow = Os + r * LDO + half * (D / 2);
      for (int x = 0; x < D / 2; ++x) orow[x] *= correction;
      __syncwarp();
      if (half == 0) {
        ms[r] = m_new;
        ls[r] = ls[r] * correction + sum;
      }
    }
    __syncwarp();
    // O += P V.
    for (int j = 0; j < D / 16; ++j) {
      FragC acc;
      wmma::load_matrix_sync(acc, Os + warp * 16 * LDO + j * 16, LDO, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        FragA a;
        FragB b;
        wmma::load_matrix_sync(a, Ps + warp * 16 * LDP + kk * 16, LDP);
        wmma::load_matrix_sync(b, Vs + kk * 16 * LDB + j * 16, LDB);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(Os + warp * 16 * LDO + j * 16, acc, LDO, wmma::mem_row_major);
    }
  }
  device::cp_async_wait<0>();
  __syncthreads();
  for (int idx = tid; idx < kTile * D / 2; idx += 128) {
    const int r = (2 * idx) / D, d = (2 * idx) % D, t = t0 + r;
    if (t >= T) continue;
    const float inv = ls[r] > 0.0f ? 1.0f / ls[r] : 0.0f;
    *reinterpret_cast<__nv_bfloat162*>(y + ((size_t)t * H + h) * D + d) =
        __floats2bfloat162_rn(Os[r * LDO + d] * inv, Os[r * LDO + d + 1] * inv);
  }
  if (lse && tid < kTile && t0 + tid < T)
    lse[(size_t)(t0 + tid) * H + h] = (ms[tid] + log2f(ls[tid])) / kLog2e;
}

// ---- decode ---------------------------------------------------------------------------------

constexpr int kDecodeSplit = 256;  // keys per split block

// grid (⌈context/256⌉, H), 128 threads (4 warps, each a quarter of the split's keys). Writes the
// split's max, sum and unnormalized output.
template <int D>
__global__ void __launch_bounds__(128) decode_split_kernel(float* __restrict__ part_m,
                                                           float* __restrict__ part_l,
                                                           float* __restrict__ part_o,
                                                           const bf16* __restrict__ q,
                                                           const bf16* __restrict__ k,
                                                           const bf16* __restrict__ v,
                                                           long context, int H, int G) {
  constexpr int E = D / 32;  // elements per lane
  __shared__ float wm[4], wl[4], wo[4][D];
  const int split = blockIdx.x, h = blockIdx.y, hk = h / (H / G);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float scale = kLog2e / sqrtf((float)D);
  float qr[E], acc[E];
#pragma unroll
  for (int x = 0; x < E; ++x) {
    qr[x] = __bfloat162float(q[(size_t)h * D + lane * E + x]) * scale;
    acc[x] = 0.0f;
  }
  float m = -1e30f, l = 0.0f;
  const long j_begin = (long)split * kDecodeSplit, j_end = min(context, j_begin + kDecodeSplit);
  for (long j = j_begin + warp; j < j_end; j += 4) {
    const bf16* kj = k + ((size_t)j * G + hk) * D + lane * E;
    float s = 0.0f;
#pragma unroll
    for (int x = 0; x < E; ++x) s += qr[x] * __bfloat162float(kj[x]);
    s = device::warp_sum(s);
    const float m_new = fmaxf(m, s), corr = exp2f(m - m_new), p = exp2f(s - m_new);
    l = l * corr + p;
    const bf16* vj = v + ((size_t)j * G + hk) * D + lane * E;
#pragma unroll
    for (int x = 0; x < E; ++x) acc[x] = acc[x] * corr + p * __bfloat162float(vj[x]);
    m = m_new;
  }
  if (lane == 0) wm[warp] = m, wl[warp] = l;
#pragma unroll
  for (int x = 0; x < E; ++x) wo[warp][lane * E + x] = acc[x];
  __syncthreads();
  if (warp == 0) {
    float M = -1e30f;
    for (int w = 0; w < 4; ++w) M = fmaxf(M, wm[w]);
    float Lsum = 0.0f;
    for (int w = 0; w < 4; ++w) Lsum += wl[w] * exp2f(wm[w] - M);
    const size_t base = (size_t)h * gridDim.x + split;
    for (int x = 0; x < E; ++x) {
      const int d = lane * E + x;
      float o = 0.0f;
      for (int w = 0; w < 4; ++w) o += wo[w][d] * exp2f(wm[w] - M);
      part_o[base * D + d] = o;
    }
    if (lane == 0) part_m[base] = M, part_l[base] = Lsum;
  }
}

// grid (H), D threads: combines the splits of head h.
__global__ void decode_combine_kernel(bf16* __restrict__ y, const float* __restrict__ part_m,
                                      const float* __restrict__ part_l,
                                      const float* __restrict__ part_o, int splits, int D) {
  const int h = blockIdx.x, d = threadIdx.x;
  const size_t base = (size_t)h * splits;
  float M = -1e30f;
  for (int s = 0; s < splits; ++s) M = fmaxf(M, part_m[base + s]);
  float Lsum = 0.0f, o = 0.0f;
  for (int s = 0; s < splits; ++s) {
    const float w = exp2f(part_m[base + s] - M);
    Lsum += part_l[base + s] * w;
    o += part_o[(base + s) * D + d] * w;
  }
  y[(size_t)h * D + d] = __float2bfloat16(o / Lsum);
}

}  // namespace

Status attention_forward(bf16* y, float* lse, const bf16* q, const bf16* k, const bf16* v, int T,
                         int H, int G, int D, AttentionMaskSpec mask, cudaStream_t stream) {
  if (T <= 0 || H <= 0 || G <= 0 || H % G != 0)
    return make_error("attention_forward: bad shape T=", T, " H=", H, " G=", G);
  return dispatch_head_dim(D, [&](auto d) -> Status {
    constexpr int Dc = decltype(d)::value;
    using L = FlashLayout<Dc>;
    auto kernel = flash_forward_kernel<Dc>;
    GL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)L::total));
    kernel<<<dim3((T + kTile - 1) / kTile, H), 128, L::total, stream>>>(y, lse, q, k, v, T, H, G,
                                                                       mask.sinks, mask.window);
    GL_CUDA_CHECK_LAUNCH();
    return ok_status();
  });
}

size_t attention_decode_workspace_bytes(int H, int D, long max_context) {
  const size_t splits = (max_context + kDecodeSplit - 1) / kDecodeSplit;
  return (size_t)H * splits * (2 + D) * sizeof(float);
}

Status attention_decode(bf16* y, const bf16* q, const bf16* k, const bf16* v, long context, int H,
                        int G, int D, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream) {
  if (context <= 0 || H % G != 0) return make_error("attention_decode: bad context or heads");
  if (workspace_bytes < attention_decode_workspace_bytes(H, D, context))
    return make_error("attention_decode: workspace too small for context ", context);
  const int splits = (int)((context + kDecodeSplit - 1) / kDecodeSplit);
  float* part_m = static_cast<float*>(workspace);
  float* part_l = part_m + (size_t)H * splits;
  float* part_o = part_l + (size_t)H * splits;
  return dispatch_head_dim(D, [&](auto d) -> Status {
    constexpr int Dc = decltype(d)::value;
    decode_split_kernel<Dc><<<dim3(splits, H), 128, 0, stream>>>(part_m, part_l, part_o, q, k, v,
                                                                context, H, G);
    GL_CUDA_CHECK_LAUNCH();
    decode_combine_kernel<<<H, Dc, 0, stream>>>(y, part_m, part_l, part_o, splits, Dc);
    GL_CUDA_CHECK_LAUNCH();
    return ok_status();
  });
}

}  // namespace golinear::kernels::cuda
