// Matrix products on the GPU (gemm.h): cuBLAS for the general case, our own GEMV for one row.
#include "kernels/cuda/gemm.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "kernels/cuda/activation.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rms_row.cuh"

namespace golinear::kernels::cuda {

namespace {

using device::warp_sum;

// One-row GEMM (the decode step): out (N) = W (N, K) · x (K) + beta · out; W, x bf16 with
// K % 8 == 0 (16-byte rows). Persistent blocks keep x in shared memory; a warp streams one
// weight row at a time with 16-byte loads, several in flight. Launched as a programmatic
// dependent (launch.h): its blocks are resident when the kernel before it (the norm, the mixer,
// the activation) ends, and wait (pdl_wait) for their x and out; it starts its own dependent at
// once. Asking weights into L2 meanwhile was slower (4 KiB a warp: +0.14 ms a batch-1 8B step;
// more, slower still: BENCHMARKS.md session 15); a warp's first loads go out before x is in
// shared memory instead.
#ifndef GL_GEMV_EARLY
#define GL_GEMV_EARLY 0
#endif
// What the GEMV's x is: bf16 as given, SwiGLU of a stacked [gate; up] row (gemm_nt_swiglu), or
// the RMSNorm of an fp32 row, kVec float4s a thread (gemm_nt_rmsnorm; rms_row.cuh).
constexpr int kXBf16 = 0, kXSwiGLU = -1;  // > 0: RMSNorm with kVec = kX

// The norm's inputs (kX > 0): weights, eps, and where block 0 writes the normed row.
struct GemvNorm {
  const float* w = nullptr;
  float eps = 0.0f;
  bf16* out = nullptr;
};

template <bool kOutBf16, int kX>
__global__ void __launch_bounds__(256) gemv_kernel(void* out, const bf16* __restrict__ W,
                                                   const void* __restrict__ x, int N, int K,
                                                   float beta, int staged, GemvNorm norm) {
  extern __shared__ uint4 smem[];  // x (K / 8), then each warp's staged loads (staged × 32)
  uint4* const xs = smem;
  const int K8 = K / 8;
  const int lane = threadIdx.x % 32;
  uint4* const stage = smem + K8 + (threadIdx.x / 32) * staged * 32;
  const long warps = (long)gridDim.x * (blockDim.x / 32);
  const long first = blockIdx.x * (long)(blockDim.x / 32) + threadIdx.x / 32;
  device::pdl_trigger();
#if GL_GEMV_EARLY == 0
  device::pdl_wait();
#endif
  // The first row's first kAhead loads, issued before x is in shared memory (they do not need it).
  constexpr int kAhead = 4;
  uint4 ahead[kAhead];
  const uint4* const row0 = reinterpret_cast<const uint4*>(W + first * K);
#pragma unroll
  for (int u = 0; u < kAhead; ++u)
    if (first < N && lane + 32 * u < K8) ahead[u] = __ldg(row0 + lane + 32 * u);
#if GL_GEMV_EARLY == 2
  for (int u = 0; u < staged; ++u) {
    const int c = lane + 32 * (kAhead + u);
    if (first < N && c < K8) device::cp_async16(stage + 32 * u + lane, row0 + c, true);
  }
  device::cp_async_commit();
#endif
  [[maybe_unused]] device::RmsRow<(kX > 0 ? kX : 1)> rr;
  if constexpr (kX > 0) rr.load_weights(norm.w, K / 4);  // constant: before the wait
#if GL_GEMV_EARLY != 0
  device::pdl_wait();
#endif
  if constexpr (kX > 0) {
    __shared__ float scratch[32];
    rr.load_row(static_cast<const float*>(x), K / 4);
    const float r = rr.inv_rms(K, norm.eps, scratch);
#pragma unroll
    for (int i = 0; i < kX; ++i)
      if (rr.at(i) < K / 4) {
        const uint2 v = rr.scaled(i, r);
        reinterpret_cast<uint2*>(xs)[rr.at(i)] = v;
        if (blockIdx.x == 0 && norm.out) reinterpret_cast<uint2*>(norm.out)[rr.at(i)] = v;
      }
  } else if constexpr (kX == kXSwiGLU) {  // x = [gate (K); up (K)]: xs = bf16(silu(gate) · up), as swiglu_stacked
    for (int i = threadIdx.x; i < K8; i += blockDim.x) {
      const uint4 g8 = reinterpret_cast<const uint4*>(x)[i], u8 = reinterpret_cast<const uint4*>(x)[K8 + i];
      const bf16* g = reinterpret_cast<const bf16*>(&g8);
      const bf16* u = reinterpret_cast<const bf16*>(&u8);
      uint4 a8;
      bf16* a = reinterpret_cast<bf16*>(&a8);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float z = __bfloat162float(g[e]);
        a[e] = __float2bfloat16(z / (1.0f + expf(-z)) * __bfloat162float(u[e]));
      }
      xs[i] = a8;
    }
  } else {
    for (int i = threadIdx.x; i < K8; i += blockDim.x) xs[i] = reinterpret_cast<const uint4*>(x)[i];
  }
#if GL_GEMV_EARLY == 2
  device::cp_async_wait<0>();
#endif
  __syncthreads();
  auto dot8 = [&](const uint4& w, const uint4& xv, float& acc) {
    const __nv_bfloat162* pw = reinterpret_cast<const __nv_bfloat162*>(&w);
    const __nv_bfloat162* px = reinterpret_cast<const __nv_bfloat162*>(&xv);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 fw = __bfloat1622float2(pw[e]), fx = __bfloat1622float2(px[e]);
      acc += fw.x * fx.x + fw.y * fx.y;
    }
  };
  for (long r = first; r < N; r += warps) {
    const uint4* row = reinterpret_cast<const uint4*>(W + r * K);
    float acc = 0.0f;
    int c0 = lane;
    if (r == first) {
#pragma unroll
      for (int u = 0; u < kAhead; ++u, c0 += 32)
        if (c0 < K8) dot8(ahead[u], xs[c0], acc);
      for (int u = 0; u < staged; ++u, c0 += 32)
        if (c0 < K8) dot8(stage[32 * u + lane], xs[c0], acc);
    }
#pragma unroll 4
    for (int c = c0; c < K8; c += 32) dot8(__ldg(row + c), xs[c], acc);
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
  }
}

// The handles given a workspace of their own (gemm_use_workspace).
std::mutex workspaces_mutex;
std::unordered_map<cublasHandle_t, std::pair<void*, size_t>>& workspaces() {
  static auto* map = new std::unordered_map<cublasHandle_t, std::pair<void*, size_t>>;
  return *map;
}


// The one-row products run our GEMV (gemv_kernel): x in ≤ 48 KiB of shared memory, 16-byte rows.
bool gemv_applies(long M, int K, const void* x, const void* W) {
  return M == 1 && K % 8 == 0 && K <= 24576 &&
         ((reinterpret_cast<size_t>(x) | reinterpret_cast<size_t>(W)) & 15) == 0;
}

template <int kX>
Status launch_gemv(void* C, bool c_is_bf16, const void* x, const bf16* W, int N, int K, float beta,
                   cudaStream_t stream, GemvNorm norm = {}) {
  const int blocks = (int)std::min<long>((N + 7) / 8, (long)sm_count() * 8);
  const int per_lane = (K / 8 + 31) / 32;
#if GL_GEMV_EARLY == 2
  const int staged = std::max(0, std::min(per_lane - 4, (57344 - K * 2) / 4096));
#else
  const int staged = 0;
#endif
  const size_t smem = (size_t)K * sizeof(bf16) + (size_t)staged * 4096;
  auto kernel = c_is_bf16 ? gemv_kernel<true, kX> : gemv_kernel<false, kX>;
  if (smem > 48 * 1024)
    GL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  GL_CUDA_CHECK(launch_dependent(kernel, (unsigned)blocks, 256, smem, stream, C, W, x, N, K, beta,
                                 staged, norm));
  return ok_status();
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
  if (gemv_applies(M, K, A, B)) return launch_gemv<kXBf16>(C, c_is_bf16, A, B, N, K, beta, stream);
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

Status gemm_nt_swiglu(cublasHandle_t handle, void* C, bool c_is_bf16, bf16* act, const bf16* gu,
                      const bf16* B, long M, int N, int F, float beta, cudaStream_t stream) {
  if (gemv_applies(M, F, gu, B) && F % 8 == 0)
    return launch_gemv<kXSwiGLU>(C, c_is_bf16, gu, B, N, F, beta, stream);
  if (M > 0x7fffffffL) return make_error("gemm_nt_swiglu: M = ", M, " does not fit an int");
  GL_TRY(swiglu_stacked(act, gu, (int)M, F, stream));
  return gemm_nt(handle, C, c_is_bf16, act, B, M, N, F, beta, stream);
}

Status gemm_nt_rmsnorm(cublasHandle_t handle, void* C, bool c_is_bf16, bf16* xn, const float* h,
                       const float* norm_w, float eps, const bf16* B, long M, int N, int K,
                       float beta, cudaStream_t stream) {
  const int per = (K / 4 + 255) / 256;  // rmsnorm_f32_forward's float4s a thread
  const bool vec = K % 4 == 0 && ((reinterpret_cast<size_t>(xn) | reinterpret_cast<size_t>(h) |
                                   reinterpret_cast<size_t>(norm_w)) & 15) == 0;
  if (gemv_applies(M, K, h, B) && vec && per <= 8) {
    const GemvNorm norm{norm_w, eps, xn};
    if (per <= 1) return launch_gemv<1>(C, c_is_bf16, h, B, N, K, beta, stream, norm);
    if (per <= 2) return launch_gemv<2>(C, c_is_bf16, h, B, N, K, beta, stream, norm);
    if (per <= 4) return launch_gemv<4>(C, c_is_bf16, h, B, N, K, beta, stream, norm);
    return launch_gemv<8>(C, c_is_bf16, h, B, N, K, beta, stream, norm);
  }
  if (M > 0x7fffffffL) return make_error("gemm_nt_rmsnorm: M = ", M, " does not fit an int");
  GL_TRY(rmsnorm_f32_forward(xn, h, norm_w, (int)M, K, eps, stream));
  return gemm_nt(handle, C, c_is_bf16, xn, B, M, N, K, beta, stream);
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
