// Matrix products on the GPU (gemm.h): cuBLAS for the general case, our own GEMV for few rows.
#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemm.h"

namespace golinear::kernels::cuda {

namespace {

using device::warp_sum;

// Few-row GEMM (decode steps of 1 … kGemvMaxRows sequences): out (M, N) = x (M, K) · Wᵀ + beta ·
// out, W (N, K) and x bf16 with K % 8 == 0 (16-byte rows), fp32 accumulation. Bandwidth-bound: W
// is read once. A block owns kGemvRowsPerBlock consecutive rows of W; its threads split K in
// 16-byte chunks (8 values), each thread issuing kGemvUnroll × rows loads before using any, so
// that 8 × 16 bytes per thread are in flight. x (M rows) is read through L1 (every block of an SM
// reads the same x; no staging in shared memory, so no wait before the first weight load), W
// bypasses L1 (read once). Each thread's M × rows partial sums are reduced over the warp by
// shuffles and over the block's warps in shared memory. One launch (a programmatic dependent of
// the kernel before it), no allocation, no host synchronisation: capturable in a CUDA graph.
constexpr int kGemvRowsPerBlock = 4;
constexpr int kGemvUnroll = 2;
constexpr int kGemvMaxThreads = 256;

// 16 bytes of W, read once: not kept in L1 (ld.global.nc.L1::no_allocate).
__device__ __forceinline__ uint4 load_stream16(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// The 8 bf16 values of a 16-byte chunk as floats (a bf16 is the top half of an fp32).
__device__ __forceinline__ void unpack8(const uint4& v, float (&f)[8]) {
  const unsigned u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(u[i] << 16);
    f[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
  }
}

template <int M, bool kOutBf16>
__global__ void __launch_bounds__(kGemvMaxThreads)
    gemv_kernel(void* out, const bf16* __restrict__ W, const bf16* __restrict__ x, int N, int K,
                float beta) {
  constexpr int R = kGemvRowsPerBlock, U = kGemvUnroll;
  const int K8 = K / 8, T = blockDim.x;
  const long n0 = (long)blockIdx.x * R;
  const uint4* w0 = reinterpret_cast<const uint4*>(W) + n0 * K8;
  const int last = (int)min((long)R, N - n0) - 1;  // rows past N read row N - 1, unwritten
  const uint4* x16 = reinterpret_cast<const uint4*>(x);
  // Launched as a programmatic dependent (launch_gemv): W does not depend on the kernels before
  // this one, x and out do. This thread's first chunks of W are asked into L2 before the wait, so
  // that the weight stream starts while the previous kernel ends.
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int c = threadIdx.x + u * T;
    if (c < K8)
#pragma unroll
      for (int r = 0; r < R; ++r) device::prefetch_l2(w0 + (long)min(r, last) * K8 + c);
  }
  device::wait_for_prior_grids();
  float acc[M][R] = {};
  for (int base = threadIdx.x; base < K8; base += U * T) {
    uint4 w[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = base + u * T;
#pragma unroll
      for (int r = 0; r < R; ++r)
        w[u][r] = c < K8 ? load_stream16(w0 + (long)min(r, last) * K8 + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = base + u * T;
      if (c >= K8) continue;
      float wf[R][8];
#pragma unroll
      for (int r = 0; r < R; ++r) unpack8(w[u][r], wf[r]);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[8];
        unpack8(__ldg(x16 + (long)m * K8 + c), xf);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[m][r] = fmaf(wf[r][e], xf[e], acc[m][r]);
      }
    }
  }
  __shared__ float partial[kGemvMaxThreads / 32][M * R];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float s = warp_sum(acc[m][r]);
      if (lane == 0) partial[warp][m * R + r] = s;
    }
  __syncthreads();
  if (threadIdx.x < M * R) {
    const int m = threadIdx.x / R, r = threadIdx.x % R;
    if (n0 + r >= N) return;
    float s = 0.0f;
    for (int i = 0; i < T / 32; ++i) s += partial[i][threadIdx.x];
    const long o = (long)m * N + n0 + r;
    if constexpr (kOutBf16) {
      bf16* p = static_cast<bf16*>(out) + o;
      *p = __float2bfloat16(beta != 0.0f ? s + beta * __bfloat162float(*p) : s);
    } else {
      float* p = static_cast<float*>(out) + o;
      *p = beta != 0.0f ? s + beta * *p : s;
    }
  }
}

template <int M>
cudaError_t launch_gemv(void* C, bool c_is_bf16, const bf16* A, const bf16* B, int N, int K,
                        float beta, cudaStream_t stream) {
  // Threads: enough that each covers ≤ kGemvUnroll chunks of a row, a multiple of 32, ≤ 256.
  const int chunks = K / 8;
  const int threads = std::min(
      kGemvMaxThreads, std::max(32, ((chunks + kGemvUnroll - 1) / kGemvUnroll + 31) / 32 * 32));
  const unsigned blocks = (unsigned)((N + kGemvRowsPerBlock - 1) / kGemvRowsPerBlock);
  // A programmatic dependent of the previous kernel in the stream (also inside a captured graph):
  // its blocks may start as that kernel ends (or earlier where it calls allow_dependents).
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(threads);
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
#ifndef GL_GEMV_PDL  // experiment switch (variant builds only)
#define GL_GEMV_PDL 1
#endif
  config.numAttrs = GL_GEMV_PDL;
  return cudaLaunchKernelEx(&config, c_is_bf16 ? gemv_kernel<M, true> : gemv_kernel<M, false>, C, B,
                            A, N, K, beta);
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

Status gemm_nt(cublasHandle_t handle, void* C, bool c_is_bf16, const bf16* A, const bf16* B, long M,
               int N, int K, float beta, cudaStream_t stream) {
  if (M <= 0) return ok_status();
  if (M <= kGemvMaxRows && N <= kGemvMaxColumns && gemv_covers(A, B, K))
    return gemv_nt(C, c_is_bf16, A, B, (int)M, N, K, beta, stream);
  return gemm_nt_cublas(handle, C, c_is_bf16, A, B, M, N, K, beta, stream);
}

bool gemv_covers(const bf16* A, const bf16* B, int K) {
  return K > 0 && K % 8 == 0 &&
         ((reinterpret_cast<size_t>(A) | reinterpret_cast<size_t>(B)) & 15) == 0;
}

Status gemv_nt(void* C, bool c_is_bf16, const bf16* A, const bf16* B, int M, int N, int K,
               float beta, cudaStream_t stream) {
  if (M <= 0 || N <= 0) return ok_status();
  if (M > kGemvMaxSupportedRows || !gemv_covers(A, B, K))
    return make_error("gemv_nt: M = ", M, ", K = ", K,
                      " not covered (M ≤ 8, K a multiple of 8, 16-byte aligned A and B)");
  cudaError_t gemv_launch = cudaSuccess;
  switch (M) {
    case 1:
      gemv_launch = launch_gemv<1>(C, c_is_bf16, A, B, N, K, beta, stream);
      break;
    case 2:
      gemv_launch = launch_gemv<2>(C, c_is_bf16, A, B, N, K, beta, stream);
      break;
    case 3:
      gemv_launch = launch_gemv<3>(C, c_is_bf16, A, B, N, K, beta, stream);
      break;
    case 4:
      gemv_launch = launch_gemv<4>(C, c_is_bf16, A, B, N, K, beta, stream);
      break;
    case 5:
      gemv_launch = launch_gemv<5>(C, c_is_bf16, A, B, N, K, beta, stream);
      break;
    case 6:
      gemv_launch = launch_gemv<6>(C, c_is_bf16, A, B, N, K, beta, stream);
      break;
    case 7:
      gemv_launch = launch_gemv<7>(C, c_is_bf16, A, B, N, K, beta, stream);
      break;
    default:
      gemv_launch = launch_gemv<8>(C, c_is_bf16, A, B, N, K, beta, stream);
      break;
  }
  GL_CUDA_CHECK(gemv_launch);
  return ok_status();
}

Status gemm_nt_cublas(cublasHandle_t handle, void* C, bool c_is_bf16, const bf16* A, const bf16* B,
                      long M, int N, int K, float beta, cudaStream_t stream) {
  if (M <= 0) return ok_status();
  if (M > 0x7fffffffL) return make_error("gemm_nt: M = ", M, " does not fit cuBLAS's int");
  const float one = 1.0f;
  GL_TRY(gemm_bind_stream(handle, stream));
  const cublasStatus_t s = cublasGemmEx(
      handle, CUBLAS_OP_T, CUBLAS_OP_N, N, (int)M, K, &one, B, CUDA_R_16BF, K, A, CUDA_R_16BF, K,
      &beta, C, c_is_bf16 ? CUDA_R_16BF : CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
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
  GL_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16BF, N,
                               A, CUDA_R_16BF, K, &beta, C, CUDA_R_32F, N, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT));
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
  GL_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_T, C, N, T, &one, x, CUDA_R_16BF, C,
                               dout, CUDA_R_16BF, N, &one, dW, CUDA_R_32F, C, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT));
  return ok_status();
}

}  // namespace golinear::kernels::cuda
