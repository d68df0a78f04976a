// Matrix products on the GPU (gemm.h): cuBLAS for the general case, our own GEMV for one row.
#include "kernels/cuda/gemm.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.h"

namespace golinear::kernels::cuda {

namespace {

using device::warp_sum;

// 16 bytes of a weight that is read once a step: not kept in L1, and first out of L2 (a step
// streams 15 GB of weights through 50 MB of L2; what else it holds — activations, the caches'
// rows — should stay).
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ uint4 load_streamed(const uint4* p, uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(policy));
  return v;
}

// One-row GEMM (the decode step): out (N) = W (N, K) · x (K) + beta · out; W, x bf16 with
// K % 8 == 0 (16-byte rows). Each block copies x into shared memory; a warp takes rows a grid of
// warps apart and streams them as chunks of kChunk 16-byte loads a lane, software-pipelined: the
// next chunk's loads (of this row or the warp's next) go out before the current chunk is used,
// so that a warp has 4 to 8 loads in flight across its row ends; the weights are read past L1
// and first out of L2. Over the 8B layer's four products alone that reads 3.99 TB/s against the
// previous kernel's 3.77 (one row at a time, 4 loads in flight, waiting at each row end) and a
// plain read's 4.09 (scripts/device/gemv_micro.cu; BENCHMARKS.md session 23). A lane adds its
// columns in ascending order whatever the chunking: the bits are the previous kernel's.
// __launch_bounds__(256, 4) makes ptxas use 55 registers: 4 blocks (32 warps) an SM. Without the
// 4 it uses 48, an SM holds 5, and the products are slower (3.89 TB/s; 0.1 ms a batch-1 8B
// step); holding 5 back by a shared-memory floor and the carveout instead cost 0.1–0.2 ms a step
// (the carveout differs from the kernels around it). The grid is up to 16 blocks an SM: blocks
// that finish early make room for the next, which evens out the end of a product (4 an SM, all
// resident, was 0.06 ms a batch-1 8B step slower than 8: session 22). Launched as a programmatic
// dependent (launch.h): its blocks become resident while the kernel before it (the norm, the
// mixer, the activation) ends, load their first chunk (the weights do not change during a
// decode step: launch.h's "constants"), then wait (pdl_wait) for their x and out; it starts its
// own dependent at once. That first chunk before the wait is −0.07 ms a batch-1 8B step
// (session 23; the mixer, beside which the o product's blocks wait, takes 1 µs longer for it).
// Asking weights into L2 instead was slower (4 KiB a warp: +0.14 ms a batch-1 8B step; more,
// slower still: BENCHMARKS.md session 15; the o and gate/up weights asked by a kernel beside the
// mixer, +0.08: session 22).
template <bool kOutBf16>
__global__ void __launch_bounds__(256, 4) gemv_kernel(void* out, const bf16* __restrict__ W,
                                                      const bf16* __restrict__ x, int N, int K,
                                                      float beta) {
  extern __shared__ uint4 xs[];  // K / 8
  constexpr int kChunk = 4;
  const int K8 = K / 8, lane = threadIdx.x % 32;
  const int chunks = (K8 + 32 * kChunk - 1) / (32 * kChunk);  // a row's
  const long warps = (long)gridDim.x * (blockDim.x / 32);
  long r = blockIdx.x * (long)(blockDim.x / 32) + threadIdx.x / 32;
  const uint64_t policy = evict_first_policy();
  // Chunk c of row `row` into w (columns past the row's end: zeros, not used).
  auto load_chunk = [&](uint4 (&w)[kChunk], long row, int c) {
    const uint4* src = reinterpret_cast<const uint4*>(W + row * K);
#pragma unroll
    for (int u = 0; u < kChunk; ++u) {
      const int col = (c * kChunk + u) * 32 + lane;
      w[u] = col < K8 ? load_streamed(src + col, policy) : make_uint4(0, 0, 0, 0);
    }
  };
  device::pdl_trigger();
  uint4 cur[kChunk];
  if (r < N) load_chunk(cur, r, 0);  // weights: constant through the step, read before the wait
  device::pdl_wait();
  for (int i = threadIdx.x; i < K8; i += blockDim.x) xs[i] = reinterpret_cast<const uint4*>(x)[i];
  __syncthreads();
  if (r >= N) return;
  int c = 0;
  float acc = 0.0f;
  while (true) {
    long r_next = r;
    int c_next = c + 1;
    if (c_next == chunks) c_next = 0, r_next += warps;
    const bool more = r_next < N;
    uint4 next[kChunk];
    if (more) load_chunk(next, r_next, c_next);
#pragma unroll
    for (int u = 0; u < kChunk; ++u) {
      const int col = (c * kChunk + u) * 32 + lane;
      if (col < K8) {
        const __nv_bfloat162* pw = reinterpret_cast<const __nv_bfloat162*>(&cur[u]);
        const __nv_bfloat162* px = reinterpret_cast<const __nv_bfloat162*>(&xs[col]);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 fw = __bfloat1622float2(pw[e]), fx = __bfloat1622float2(px[e]);
          acc += fw.x * fx.x + fw.y * fx.y;
        }
      }
    }
    if (c_next == 0) {  // row r done
      acc = warp_sum(acc);
      if (lane == 0) {
        if constexpr (kOutBf16) {
          bf16* o = static_cast<bf16*>(out) + r;
          *o = __float2bfloat16(beta != 0.0f ? acc + beta * __bfloat162float(*o) : acc);
        } else {
          float* o = static_cast<float*>(out) + r;
          *o = beta != 0.0f ? acc + beta * *o : acc;
        }
      }
      acc = 0.0f;
    }
    if (!more) break;
#pragma unroll
    for (int u = 0; u < kChunk; ++u) cur[u] = next[u];
    r = r_next, c = c_next;
  }
}

// The handles given a workspace of their own (gemm_use_workspace).
std::mutex workspaces_mutex;
std::unordered_map<cublasHandle_t, std::pair<void*, size_t>>& workspaces() {
  static auto* map = new std::unordered_map<cublasHandle_t, std::pair<void*, size_t>>;
  return *map;
}

}  // namespace

Status gemm_use_workspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(workspaces_mutex);
    workspaces()[handle] = {workspace, bytes};
  }
  GL_CUBLAS_CHECK(cublasSetWorkspace(handle, workspace, bytes));
  return ok_status();
}

void gemm_release_workspace(cublasHandle_t handle) {
  std::lock_guard<std::mutex> lock(workspaces_mutex);
  workspaces().erase(handle);
}

Status gemm_bind_stream(cublasHandle_t handle, cudaStream_t stream) {
  cudaStream_t current = nullptr;
  GL_CUBLAS_CHECK(cublasGetStream(handle, &current));
  if (current == stream) return ok_status();
  GL_CUBLAS_CHECK(cublasSetStream(handle, stream));
  std::pair<void*, size_t> own{nullptr, 0};
  {
    std::lock_guard<std::mutex> lock(workspaces_mutex);
    auto it = workspaces().find(handle);
    if (it != workspaces().end()) own = it->second;
  }
  if (!own.first) return ok_status();
  GL_CUBLAS_CHECK(cublasSetWorkspace(handle, own.first, own.second));
  return ok_status();
}

Status gemm_nt(cublasHandle_t handle, void* C, bool c_is_bf16, const bf16* A, const bf16* B,
               long M, int N, int K, float beta, cudaStream_t stream) {
  if (M <= 0) return ok_status();
  if (M > 0x7fffffffL) return make_error("gemm_nt: M = ", M, " does not fit cuBLAS's int");
  if (M == 1 && K % 8 == 0 && K <= 24576 &&  // x in ≤ 48 KiB of shared memory
      ((reinterpret_cast<size_t>(A) | reinterpret_cast<size_t>(B)) & 15) == 0) {
    const int blocks = (int)std::min<long>((N + 7) / 8, (long)sm_count() * 16);
    const size_t smem = (size_t)K * sizeof(bf16);
    GL_CUDA_CHECK(launch_dependent(c_is_bf16 ? gemv_kernel<true> : gemv_kernel<false>,
                                   (unsigned)blocks, 256, smem, stream, C, B, A, N, K, beta));
    return ok_status();
  }
  const float one = 1.0f;
  GL_TRY(gemm_bind_stream(handle, stream));
  const cublasStatus_t s =
      cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, (int)M, K, &one, B, CUDA_R_16BF, K, A,
                   CUDA_R_16BF, K, &beta, C, c_is_bf16 ? CUDA_R_16BF : CUDA_R_32F, N,
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS)  // GL_CUBLAS_CHECK's message, with the shape
    return cublas_error(s, str_cat("cublasGemmEx (M=", M, " N=", N, " K=", K, ")").c_str(),
                        __FILE__, __LINE__);
  return ok_status();
}


Status gemm_bf16_nt(cublasHandle_t handle, void* C, bool c_is_bf16, const bf16* A, const bf16* B,
                    int M, int N, int K, cudaStream_t stream) {
  return gemm_nt(handle, C, c_is_bf16, A, B, M, N, K, 0.0f, stream);
}

Status gemm_bf16_nn(cublasHandle_t handle, float* C, float beta, const bf16* A, const bf16* B,
                    int M, int N, int K, cudaStream_t stream) {
  // Row-major C (M, N) is column-major (N, M) = B_cm (N, K) · A_cm (K, M).
  const float one = 1.0f;
  GL_TRY(gemm_bind_stream(handle, stream));
  GL_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16BF,
                               N, A, CUDA_R_16BF, K, &beta, C, CUDA_R_32F, N,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return ok_status();
}

Status gemm_f32_nn(cublasHandle_t handle, float* C, float beta, const float* A, const float* B,
                   int M, int N, int K, cudaStream_t stream) {
  const float one = 1.0f;
  GL_TRY(gemm_bind_stream(handle, stream));
  GL_CUBLAS_CHECK(
      cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, N, A, K, &beta, C, N));
  return ok_status();
}

Status gemm_bf16_tn_accumulate(cublasHandle_t handle, float* dW, const bf16* dout, const bf16* x,
                               int T, int N, int C, cudaStream_t stream) {
  // Row-major dW (N, C) is column-major (C, N) = x_cm (C, T) · dout_cm (N, T)ᵀ.
  const float one = 1.0f;
  GL_TRY(gemm_bind_stream(handle, stream));
  GL_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_T, C, N, T, &one, x, CUDA_R_16BF,
                               C, dout, CUDA_R_16BF, N, &one, dW, CUDA_R_32F, C,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return ok_status();
}

}  // namespace golinear::kernels::cuda
