// hybrid_cache_fill (model_ops.h): the decode cache of a hybrid layer after a prefill.
#include "kernels/cuda/model_ops.h"

#include <algorithm>

#include "kernels/cuda/device_utils.cuh"

namespace golinear::kernels::cuda {

namespace {

using device::block_sum;
using device::warp_sum;

unsigned grid_for(long n, int threads) {
  return (unsigned)std::min<long>((n + threads - 1) / threads, 1L << 20);
}

// Token i of the filled set: the sinks [0, n_sink), then the tail [tail, T).
__device__ __forceinline__ long fill_token(int i, int n_sink, long tail) {
  return i < n_sink ? (long)i : tail + (i - n_sink);
}

// grid (tokens, G), blockDim D: conv of k and v for token j and kv head g (decode-step order and
// fp32, as hybrid_decode_kernel computes them), unit key, RoPE; raw conv rows for the last 3.
__global__ void hybrid_cache_fill_kv_kernel(HybridCacheView cache, HybridParams p, const bf16* q,
                                            const bf16* k, const bf16* v, int T, int H, int G,
                                            int D, int sinks, int window, int n_sink, long tail) {
  extern __shared__ float smem[];  // kc (D), scratch (32)
  float* kc = smem;
  float* scratch = smem + D;
  const long j = fill_token(blockIdx.x, n_sink, tail);
  const int g = blockIdx.y, d = threadIdx.x, ring = window + 1;
  const long ch = (long)g * D + d;
  const long stride = (long)G * D;
  float kacc = p.conv_k[ch * 4 + 3] * __bfloat162float(k[j * stride + ch]);
  float vacc = p.conv_v[ch * 4 + 3] * __bfloat162float(v[j * stride + ch]);
  for (int i = 0; i < 3; ++i) {
    const long jj = j - 3 + i;
    if (jj >= 0) {
      kacc += p.conv_k[ch * 4 + i] * __bfloat162float(k[jj * stride + ch]);
      vacc += p.conv_v[ch * 4 + i] * __bfloat162float(v[jj * stride + ch]);
    }
  }
  kc[d] = kacc;
  const float ss = block_sum(kacc * kacc, scratch);  // blockDim = D, a multiple of 32
  const float kn = kacc * rsqrtf(ss + 1e-6f);
  const int i = d % (D / 2);
  float sn, cs;
  sincosf((float)j * p.inv_freq[i], &sn, &cs);
  const int other = d < D / 2 ? d + D / 2 : d - D / 2;
  const float kr = kacc * cs + (d < D / 2 ? -1.0f : 1.0f) * kc[other] * sn;
  if (j >= T - ring) {
    const long slot = j % ring;
    cache.ring_k[(slot * G + g) * (long)D + d] = __float2bfloat16(kr);
    cache.ring_v[(slot * G + g) * (long)D + d] = __float2bfloat16(vacc);
    cache.ring_key[(slot * G + g) * (long)D + d] = __float2bfloat16(kn);
  }
  if (j < sinks) {
    cache.sink_k[(j * G + g) * (long)D + d] = __float2bfloat16(kr);
    cache.sink_v[(j * G + g) * (long)D + d] = __float2bfloat16(vacc);
  }
  if (j >= T - 3) {
    const long slot = j % 4;
    cache.conv_k[(slot * G + g) * (long)D + d] = __bfloat162float(k[j * stride + ch]);
    cache.conv_v[(slot * G + g) * (long)D + d] = __bfloat162float(v[j * stride + ch]);
    for (int h = g * (H / G); h < (g + 1) * (H / G); ++h)
      cache.conv_q[(slot * H + h) * (long)D + d] = __bfloat162float(q[(j * H + h) * (long)D + d]);
  }
  if (blockIdx.x == 0 && blockIdx.y == 0 && d == 0) {
    *cache.position = T;
    *cache.step_done = 0;
  }
}

// One warp per (ring token, head): g and β from x · w_a, x · w_b (hybrid_decode_kernel's gates).
__global__ void hybrid_cache_fill_gates_kernel(HybridCacheView cache, HybridParams p, const bf16* x,
                                               int T, int C, int H, int window, long first) {
  const long warp = (blockIdx.x * (long)blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32, ring = window + 1;
  const long n = (T - first) * (long)H;
  if (warp >= n) return;
  const long j = first + warp / H;
  const int h = (int)(warp % H);
  const bf16* xr = x + j * C;
  const bf16* wa = p.w_gates + (long)h * C;
  const bf16* wb = p.w_gates + ((long)H + h) * C;
  float a = 0.0f, b = 0.0f;
  for (int c = lane; c < C; c += 32) {
    const float xc = __bfloat162float(xr[c]);
    a += xc * __bfloat162float(wa[c]);
    b += xc * __bfloat162float(wb[c]);
  }
  a = warp_sum(a);
  b = warp_sum(b);
  if (lane == 0) {
    const long slot = j % ring;
    cache.ring_g[slot * H + h] = -expf(p.A_log[h]) * device::softplusf_(a + p.dt_bias[h]);
    cache.ring_beta[slot * H + h] = device::sigmoidf_(b + p.b_beta[h]);
  }
}

}  // namespace

Status hybrid_cache_fill(const HybridCacheView& cache, const HybridShape& s,
                         const HybridParams& p, const bf16* x, const bf16* q, const bf16* k,
                         const bf16* v, int T, cudaStream_t stream) {
  if (s.D != 64 && s.D != 128) GL_UNSUPPORTED_HEAD_DIM(s.D);
  if (T <= 0) return ok_status();
  const int ring = s.window + 1;
  const int n_sink = std::min(s.sinks, T);
  const long tail = std::max<long>(n_sink, (long)T - std::max(ring, 3));
  const int tokens = n_sink + (int)(T - tail);
  hybrid_cache_fill_kv_kernel<<<dim3(tokens, s.G), s.D, (s.D + 32) * sizeof(float), stream>>>(
      cache, p, q, k, v, T, s.H, s.G, s.D, s.sinks, s.window, n_sink, tail);
  GL_CUDA_CHECK_LAUNCH();
  const long first = std::max(0L, (long)T - ring);
  const long warps = (T - first) * (long)s.H;
  hybrid_cache_fill_gates_kernel<<<grid_for(warps * 32, 256), 256, 0, stream>>>(
      cache, p, x, T, s.C, s.H, s.window, first);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

}  // namespace golinear::kernels::cuda
