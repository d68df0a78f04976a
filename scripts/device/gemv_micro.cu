// The decode step's one-row products alone (session 23): main's GEMV (gemm_nt at M = 1, linked
// from libgolinear_cuda.a) beside candidates (the session-22 GEMV, the software pipeline it
// became under other launch bounds, chunk sizes, grids and load hints) at the 8B step's shapes,
// each weight in enough copies that L2 holds none of the next one, launched as programmatic
// dependents like the decode step and timed as a captured graph. Prints µs per product and the
// read rate, the rate of a plain read of the same bytes (this machine's ceiling), and each
// candidate's largest difference from main's output. An experiment tool, not part of the build
// (BENCHMARKS.md, session 23, says what it found):
//   nvcc -O3 -std=c++20 -arch=sm_90a -Isrc scripts/device/gemv_micro.cu build/libgolinear_cuda.a \
//     build/libgolinear_common.a -lcublas -o gemv_micro
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/launch.h"

using bf16 = __nv_bfloat16;
namespace gk = golinear::kernels::cuda;
namespace dev = golinear::kernels::cuda::device;

#define CK(x)                                                                        \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

// 16-byte weight loads: ld.global.nc (__ldg), or past L1 with an L2 evict-first policy (main's).
// (Call 1 also measured 256-byte L2 fetches, `L2::256B`: slower, BENCHMARKS.md session 23.)
template <bool kEvictFirst>
__device__ __forceinline__ uint4 load_w(const uint4* p) {
  if constexpr (!kEvictFirst) {
    return __ldg(p);
  } else {
    uint4 v;
    unsigned long long policy;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(policy));
    return v;
  }
}

__device__ __forceinline__ void dot8(const uint4& w, const uint4& xv, float& acc) {
  const __nv_bfloat162* pw = reinterpret_cast<const __nv_bfloat162*>(&w);
  const __nv_bfloat162* px = reinterpret_cast<const __nv_bfloat162*>(&xv);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 fw = __bfloat1622float2(pw[e]), fx = __bfloat1622float2(px[e]);
    acc += fw.x * fx.x + fw.y * fx.y;
  }
}

// main's kernel (gemm.cu's gemv_kernel, fp32 out, beta 0) under other launch bounds.
template <int kMinBlocks>
__global__ void __launch_bounds__(256, kMinBlocks) gemv_copy(float* out, const bf16* __restrict__ W,
                                                             const bf16* __restrict__ x, int N, int K) {
  extern __shared__ uint4 xs[];
  const int K8 = K / 8, lane = threadIdx.x % 32;
  const long warps = (long)gridDim.x * (blockDim.x / 32);
  const long first = blockIdx.x * (long)(blockDim.x / 32) + threadIdx.x / 32;
  dev::pdl_trigger();
  dev::pdl_wait();
  constexpr int kAhead = 4;
  uint4 ahead[kAhead];
#pragma unroll
  for (int u = 0; u < kAhead; ++u)
    if (first < N && lane + 32 * u < K8) ahead[u] = __ldg(reinterpret_cast<const uint4*>(W + first * K) + lane + 32 * u);
  for (int i = threadIdx.x; i < K8; i += blockDim.x) xs[i] = reinterpret_cast<const uint4*>(x)[i];
  __syncthreads();
  for (long r = first; r < N; r += warps) {
    const uint4* row = reinterpret_cast<const uint4*>(W + r * K);
    float acc = 0.0f;
    int c0 = lane;
    if (r == first) {
#pragma unroll
      for (int u = 0; u < kAhead; ++u, c0 += 32)
        if (c0 < K8) dot8(ahead[u], xs[c0], acc);
    }
#pragma unroll 4
    for (int c = c0; c < K8; c += 32) dot8(__ldg(row + c), xs[c], acc);
    acc = dev::warp_sum(acc);
    if (lane == 0) out[r] = acc;
  }
}

// A software pipeline over the warp's chunks: a chunk is U loads of 16 bytes a lane (U·512 bytes
// of one row); the next chunk's loads (of the same row or the warp's next) are issued before the
// current one is used, so a warp keeps U to 2U loads in flight across row ends. Needs
// K / 8 % (32·U) == 0.
template <int U, int kMinBlocks, bool kEvictFirst>
__global__ void __launch_bounds__(256, kMinBlocks) gemv_pipe(float* out, const bf16* __restrict__ W,
                                                             const bf16* __restrict__ x, int N, int K) {
  extern __shared__ uint4 xs[];
  const int K8 = K / 8, lane = threadIdx.x % 32;
  const long warps = (long)gridDim.x * (blockDim.x / 32);
  long r = blockIdx.x * (long)(blockDim.x / 32) + threadIdx.x / 32;
  const int chunks = K8 / (32 * U);
  dev::pdl_trigger();
  dev::pdl_wait();
  uint4 cur[U];
  if (r < N) {
#pragma unroll
    for (int u = 0; u < U; ++u) cur[u] = load_w<kEvictFirst>(reinterpret_cast<const uint4*>(W + r * K) + lane + 32 * u);
  }
  for (int i = threadIdx.x; i < K8; i += blockDim.x) xs[i] = reinterpret_cast<const uint4*>(x)[i];
  __syncthreads();
  if (r >= N) return;
  int c = 0;
  float acc = 0.0f;
  while (true) {
    long rn = r;
    int cn = c + 1;
    if (cn == chunks) cn = 0, rn += warps;
    const bool more = rn < N;
    uint4 nxt[U];
    if (more) {
      const uint4* p = reinterpret_cast<const uint4*>(W + rn * K) + cn * 32 * U + lane;
#pragma unroll
      for (int u = 0; u < U; ++u) nxt[u] = load_w<kEvictFirst>(p + 32 * u);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) dot8(cur[u], xs[c * 32 * U + 32 * u + lane], acc);
    if (cn == 0) {
      acc = dev::warp_sum(acc);
      if (lane == 0) out[r] = acc;
      acc = 0.0f;
    }
    if (!more) break;
#pragma unroll
    for (int u = 0; u < U; ++u) cur[u] = nxt[u];
    r = rn, c = cn;
  }
}

// The plain read of the same bytes (a sum of every 16 bytes, grid-stride): this pattern's ceiling.
__global__ void __launch_bounds__(256) read_all(float* out, const bf16* __restrict__ W,
                                                const bf16* __restrict__ x, int N, int K) {
  dev::pdl_trigger();
  dev::pdl_wait();
  const long n16 = (long)N * K / 8;
  const uint4* p = reinterpret_cast<const uint4*>(W);
  float acc = 0.0f;
  const long stride = (long)gridDim.x * blockDim.x;
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n16; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = __ldg(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc += __uint_as_float(v[u].x ^ v[u].y ^ v[u].z ^ v[u].w);
  }
  for (; i < n16; i += stride) acc += __uint_as_float(p[i].x);
  if (acc == 1.2345f) out[0] = acc;  // keeps the loads
}

struct Candidate {
  std::string name;
  void (*kernel)(float*, const bf16*, const bf16*, int, int);  // null: main's gemm_nt
  int per_sm;       // blocks an SM in the grid
  int divides = 1;  // K / 8 must be a multiple of this (the pipeline's chunk)
};

struct Shape {
  const char* name;
  int N, K;
};

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 20;
  int sms = gk::sm_count();
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;

  std::vector<Candidate> cands = {
      {"main gemm_nt", nullptr, 0},
      {"session-22 kernel (copy)", gemv_copy<4>, 16},
      {"pipe U4 lb4 g16 evict_first", gemv_pipe<4, 4, true>, 16, 128},
      {"pipe U4 lb5 g16 evict_first", gemv_pipe<4, 5, true>, 16, 128},
      {"pipe U4 lb4 g32 evict_first", gemv_pipe<4, 4, true>, 32, 128},
      {"pipe U8 lb2 g16 evict_first", gemv_pipe<8, 2, true>, 16, 256},
      {"pipe U4 lb4 g16", gemv_pipe<4, 4, false>, 16, 128},
      {"read only", read_all, 16},
  };
  const std::vector<Shape> shapes = {
      {"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}, {"lm_head", 128256, 4096}};

  // Weights: every shape's copies together ≥ 1 GiB, so that a product's weights are long out of
  // L2 when it comes again.
  size_t max_bytes = 0;
  for (auto& s : shapes) max_bytes = std::max(max_bytes, (size_t)s.N * s.K * 2);
  const size_t pool_bytes = std::max<size_t>(max_bytes * 4, size_t(3) << 30);
  bf16* pool;
  CK(cudaMalloc(&pool, pool_bytes));
  {  // random bf16 in [-1, 1): a hash of the index
    std::vector<bf16> host(1 << 24);
    for (size_t i = 0; i < host.size(); ++i) {
      unsigned h = (unsigned)i * 2654435761u;
      h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
      host[i] = __float2bfloat16((float)(h & 0xffff) / 32768.0f - 1.0f);
    }
    for (size_t off = 0; off < pool_bytes / 2; off += host.size())
      CK(cudaMemcpy(pool + off, host.data(), std::min(host.size(), pool_bytes / 2 - off) * 2, cudaMemcpyHostToDevice));
  }
  bf16* x;
  float *out, *ref;
  CK(cudaMalloc(&x, 14336 * 2));
  CK(cudaMalloc(&out, 128256 * 4));
  CK(cudaMalloc(&ref, 128256 * 4));
  {
    std::vector<bf16> hx(14336);
    for (int i = 0; i < 14336; ++i) hx[i] = __float2bfloat16(std::sin(0.37f * i));
    CK(cudaMemcpy(x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
  }
  auto launch = [&](const Candidate& c, const bf16* W, int N, int K, float* o) {
    if (!c.kernel) {
      auto st = gk::gemm_nt(handle, o, false, x, W, 1, N, K, 0.0f, stream);
      if (!st.ok()) { std::fprintf(stderr, "gemm_nt failed\n"); std::exit(1); }
      return;
    }
    const int blocks = (int)std::min<long>((N + 7) / 8, (long)sms * c.per_sm);
    const size_t smem = c.kernel == read_all ? 0 : (size_t)K * 2;
    CK(gk::launch_dependent(c.kernel, dim3(blocks), dim3(256), smem, stream, o, W, (const bf16*)x, N, K));
  };
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  // A graph of `count` products (copies i % copies), replayed: median µs per product.
  auto time_graph = [&](auto&& body) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    int products = body();
    CK(cudaStreamEndCapture(stream, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    std::vector<float> ms;
    for (int i = 0; i < repeats + 3; ++i) {
      CK(cudaEventRecord(e0, stream));
      CK(cudaGraphLaunch(ge, stream));
      CK(cudaEventRecord(e1, stream));
      CK(cudaEventSynchronize(e1));
      float t;
      CK(cudaEventElapsedTime(&t, e0, e1));
      if (i >= 3) ms.push_back(t);
    }
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2] * 1000.0 / products;  // µs per product
  };

  std::printf("%-30s", "candidate (us per product, TB/s)");
  for (auto& s : shapes) std::printf(" %18s", s.name);
  std::printf(" %22s %10s\n", "layer chain (us/layer)", "max |diff|");
  for (auto& c : cands) {
    std::printf("%-30s", c.name.c_str());
    double worst = 0.0;
    for (auto& s : shapes) {
      if ((s.K / 8) % c.divides) { std::printf(" %18s", "-"); continue; }
      const size_t bytes = (size_t)s.N * s.K * 2;
      const int copies = (int)std::min<size_t>(pool_bytes / bytes, 64);
      const int count = std::max(copies, 8);
      const double us = time_graph([&] {
        for (int i = 0; i < count; ++i) launch(c, pool + (size_t)(i % copies) * bytes / 2, s.N, s.K, out);
        return count;
      });
      std::printf(" %9.2f %7.3f", us, bytes / us * 1e-6);
      if (c.kernel != read_all) {  // against main's output, copy 0
        launch(cands[0], pool, s.N, s.K, ref);
        launch(c, pool, s.N, s.K, out);
        CK(cudaStreamSynchronize(stream));
        std::vector<float> a(s.N), b(s.N);
        CK(cudaMemcpy(a.data(), ref, s.N * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(b.data(), out, s.N * 4, cudaMemcpyDeviceToHost));
        for (int i = 0; i < s.N; ++i) worst = std::max(worst, (double)std::fabs(a[i] - b[i]));
      }
    }
    // The layer's four products in order over 6 layers of distinct weights (2.6 GB).
    const Shape* layer[4] = {&shapes[0], &shapes[1], &shapes[2], &shapes[3]};
    bool fits = true;
    size_t layer_bytes = 0;
    for (auto* s : layer) fits = fits && (s->K / 8) % c.divides == 0, layer_bytes += (size_t)s->N * s->K * 2;
    const int layers = (int)std::min<size_t>(pool_bytes / layer_bytes, 6);
    if (fits) {
      const double us = time_graph([&] {
        for (int l = 0; l < layers; ++l) {
          size_t off = l * layer_bytes / 2;
          for (auto* s : layer) {
            launch(c, pool + off, s->N, s->K, out);
            off += (size_t)s->N * s->K;
          }
        }
        return layers;
      });
      std::printf(" %11.2f %7.3f", us, layer_bytes / us * 1e-6);
    } else {
      std::printf(" %19s", "-");
    }
    std::printf(" %10.3g\n", worst);
    std::fflush(stdout);
  }
  return 0;
}
