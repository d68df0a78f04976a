// The whole-model kernels (model_ops.h).
#include "kernels/cuda/model_ops.h"

#include <algorithm>
#include <cfloat>

#include "kernels/cuda/device_utils.cuh"

namespace golinear::kernels::cuda {

namespace {

using device::block_sum;
using device::grid_for;
using device::warp_sum;

__global__ void embed_gather_kernel(float* h, const bf16* embed, const int32_t* ids, int T, int C) {
  const long n = (long)T * C;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    const long t = i / C, c = i % C;
    h[i] = __bfloat162float(embed[(long)ids[t] * C + c]);
  }
}

// One block per row.
__global__ void rmsnorm_f32_kernel(bf16* out, const float* x, const float* w, int C, float eps) {
  __shared__ float scratch[32];
  const float* row = x + (long)blockIdx.x * C;
  float ss = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) ss += row[c] * row[c];
  ss = block_sum(ss, scratch);
  const float r = rsqrtf(ss / C + eps);
  bf16* o = out + (long)blockIdx.x * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) o[c] = __float2bfloat16(row[c] * r * w[c]);
}

// One warp per (token, head row) of the stacked output: rows 0..H-1 q, H..H+G-1 k, then v.
__global__ void qkv_split_kernel(bf16* q, bf16* k, bf16* v, const float* qkv, const float* bias,
                                 const float* q_norm, const float* k_norm, int T, int H, int G,
                                 int D, float eps) {
  const int lane = threadIdx.x % 32;
  const int R = H + 2 * G;
  const long warps_total = (long)gridDim.x * blockDim.x / 32;
  for (long warp = (blockIdx.x * (long)blockDim.x + threadIdx.x) / 32; warp < (long)T * R;
       warp += warps_total) {
    const long t = warp / R;
    const int r = (int)(warp % R);
    const int W = R * D;
    const float* src = qkv + t * W + (long)r * D;
    const float* b = bias ? bias + (long)r * D : nullptr;
    float vals[8];
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int d = lane + 32 * i;
      float x = 0.0f;
      if (d < D) {
        x = src[d] + (b ? b[d] : 0.0f);
        ss += x * x;
      }
      vals[i] = x;
    }
    const float* nw = nullptr;
    bf16* dst;
    if (r < H) {
      nw = q_norm;
      dst = q + (t * H + r) * D;
    } else if (r < H + G) {
      nw = k_norm;
      dst = k + (t * G + (r - H)) * D;
    } else {
      dst = v + (t * G + (r - H - G)) * D;
    }
    float scale = 1.0f;
    if (nw) scale = rsqrtf(warp_sum(ss) / D + eps);  // nw is uniform across the warp
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int d = lane + 32 * i;
      if (d < D) dst[d] = __float2bfloat16(nw ? vals[i] * scale * nw[d] : vals[i]);
    }
  }
}

__global__ void swiglu_stacked_kernel(bf16* out, const bf16* gu, int T, int F) {
  const long n = (long)T * F;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    const long t = i / F, f = i % F;
    const float g = __bfloat162float(gu[t * 2 * F + f]);
    const float u = __bfloat162float(gu[t * 2 * F + F + f]);
    out[i] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
  }
}

__global__ void add_bias_rows_kernel(float* x, const float* b, int T, int N) {
  const long n = (long)T * N;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
    x[i] += b[i % N];
}

// One block (256 threads) per row.
__global__ void argmax_rows_kernel(int32_t* out, const float* x, int V) {
  __shared__ float best_v[256];
  __shared__ int best_i[256];
  const float* row = x + (long)blockIdx.x * V;
  float bv = -FLT_MAX;
  int bi = 0x7fffffff;
  for (int i = threadIdx.x; i < V; i += blockDim.x) {
    const float val = row[i];
    if (val > bv) { bv = val; bi = i; }  // the first maximum of this thread's (rising) indices
  }
  best_v[threadIdx.x] = bv;
  best_i[threadIdx.x] = bi;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) {
      const float ov = best_v[threadIdx.x + s];
      const int oi = best_i[threadIdx.x + s];
      if (ov > best_v[threadIdx.x] || (ov == best_v[threadIdx.x] && oi < best_i[threadIdx.x])) {
        best_v[threadIdx.x] = ov;
        best_i[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = best_i[0];
}

__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
__device__ __forceinline__ float unit_uniform(unsigned long long i, unsigned long long seed) {
  const unsigned long long z = mix64(i * 0x9E3779B97F4A7C15ull + seed * 0xD1B54A32D192ED03ull + 1);
  return ((z >> 40) + 0.5f) * (1.0f / 16777216.0f);  // (0, 1)
}

__global__ void fill_normal_bf16_kernel(bf16* p, size_t n, unsigned long long seed, float std) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const float u1 = unit_uniform(2 * i, seed), u2 = unit_uniform(2 * i + 1, seed);
    const float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);  // Box–Muller
    p[i] = __float2bfloat16(std * z);
  }
}
__global__ void fill_uniform_bf16_kernel(bf16* p, size_t n, unsigned long long seed, float lo, float hi) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = __float2bfloat16(lo + (hi - lo) * unit_uniform(i, seed));
}
__global__ void fill_uniform_f32_kernel(float* p, size_t n, unsigned long long seed, float lo, float hi) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = lo + (hi - lo) * unit_uniform(i, seed);
}
__global__ void fill_const_f32_kernel(float* p, size_t n, float value) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = value;
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

Status embed_gather(float* h, const bf16* embed, const int32_t* ids, int T, int C,
                    cudaStream_t stream) {
  embed_gather_kernel<<<grid_for((long)T * C, 256), 256, 0, stream>>>(h, embed, ids, T, C);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status rmsnorm_f32_forward(bf16* out, const float* x, const float* w, int N, int C, float eps,
                           cudaStream_t stream) {
  if (N <= 0) return ok_status();
  rmsnorm_f32_kernel<<<N, 256, 0, stream>>>(out, x, w, C, eps);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status qkv_split(bf16* q, bf16* k, bf16* v, const float* qkv, const float* bias,
                 const float* q_norm, const float* k_norm, int T, int H, int G, int D, float eps,
                 cudaStream_t stream) {
  if (D > 256) return make_error("qkv_split: head dim ", D, " > 256");
  if ((q_norm == nullptr) != (k_norm == nullptr))
    return make_error("qkv_split: q_norm and k_norm go together");
  const long warps = (long)T * (H + 2 * G);
  qkv_split_kernel<<<grid_for(warps * 32, 256), 256, 0, stream>>>(q, k, v, qkv, bias, q_norm,
                                                                   k_norm, T, H, G, D, eps);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status swiglu_stacked(bf16* out, const bf16* gu, int T, int F, cudaStream_t stream) {
  swiglu_stacked_kernel<<<grid_for((long)T * F, 256), 256, 0, stream>>>(out, gu, T, F);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status add_bias_rows(float* x, const float* b, int T, int N, cudaStream_t stream) {
  add_bias_rows_kernel<<<grid_for((long)T * N, 256), 256, 0, stream>>>(x, b, T, N);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status argmax_rows(int32_t* out, const float* x, int R, int V, cudaStream_t stream) {
  if (R <= 0) return ok_status();
  argmax_rows_kernel<<<R, 256, 0, stream>>>(out, x, V);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

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

Status fill_normal_bf16(bf16* p, size_t n, uint64_t seed, float std, cudaStream_t stream) {
  fill_normal_bf16_kernel<<<2048, 256, 0, stream>>>(p, n, seed, std);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}
Status fill_uniform_bf16(bf16* p, size_t n, uint64_t seed, float lo, float hi,
                         cudaStream_t stream) {
  fill_uniform_bf16_kernel<<<2048, 256, 0, stream>>>(p, n, seed, lo, hi);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}
Status fill_uniform_f32(float* p, size_t n, uint64_t seed, float lo, float hi,
                        cudaStream_t stream) {
  fill_uniform_f32_kernel<<<2048, 256, 0, stream>>>(p, n, seed, lo, hi);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}
Status fill_const_f32(float* p, size_t n, float value, cudaStream_t stream) {
  fill_const_f32_kernel<<<2048, 256, 0, stream>>>(p, n, value);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

}  // namespace golinear::kernels::cuda
