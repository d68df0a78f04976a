// Shared pieces of the CUDA backend: the error idiom (every CUDA and cuBLAS call checked, errors
// returned as golinear::Status naming the call, file and line: GL_CUDA_CHECK, GL_CUBLAS_CHECK),
// bf16 helpers; the owners of device resources (DeviceBuffer, ...) come with it from
// device_resources.h.
//
// Storage is bf16 (__nv_bfloat16) for activations and weights, fp32 for states, gradients of
// parameters and anything accumulated; arithmetic accumulates in fp32.
// Gradient convention of every backward in kernels/cuda: gradients are WRITTEN (=) unless the
// launcher's comment says "+=" (parameter gradients accumulate across calls).
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <type_traits>
#include <utility>

#include "common/result.h"

namespace golinear::kernels::cuda {

using bf16 = __nv_bfloat16;

inline Error cuda_error(cudaError_t code, const char* expr, const char* file, int line) {
  return make_error("CUDA error '", cudaGetErrorString(code), "' in ", expr, " at ", file, ":",
                    line);
}
inline Error cublas_error(cublasStatus_t code, const char* expr, const char* file, int line) {
  return make_error("cuBLAS error '", cublasGetStatusName(code), "' in ", expr, " at ", file, ":",
                    line);
}

}  // namespace golinear::kernels::cuda

// Returns a golinear::Error from the enclosing function when a CUDA runtime call fails.
#define GL_CUDA_CHECK(expr)                                                                  \
  do {                                                                                       \
    const cudaError_t gl_cuda_code_ = (expr);                                                \
    if (gl_cuda_code_ != cudaSuccess)                                                        \
      return ::golinear::kernels::cuda::cuda_error(gl_cuda_code_, #expr, __FILE__, __LINE__); \
  } while (0)

// Returns a golinear::Error from the enclosing function when a cuBLAS call fails.
#define GL_CUBLAS_CHECK(expr)                                                                  \
  do {                                                                                         \
    const cublasStatus_t gl_cublas_code_ = (expr);                                             \
    if (gl_cublas_code_ != CUBLAS_STATUS_SUCCESS)                                              \
      return ::golinear::kernels::cuda::cublas_error(gl_cublas_code_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: reports launch-configuration errors (not asynchronous faults).
#define GL_CUDA_CHECK_LAUNCH() GL_CUDA_CHECK(cudaGetLastError())

// An unsupported compile-time size reaches here: fail loudly, never fall back silently.
#define GL_UNSUPPORTED_HEAD_DIM(D) \
  return ::golinear::make_error("unsupported head dim ", (D), " (supported: 64, 128) at ", __FILE__, ":", __LINE__)

namespace golinear::kernels::cuda {

// Calls f(std::integral_constant<int, D>{}) for a supported head dim D, else an error.
template <class F>
Status dispatch_head_dim(int D, F&& f) {
  switch (D) {
    case 64: return f(std::integral_constant<int, 64>{});
    case 128: return f(std::integral_constant<int, 128>{});
    default: GL_UNSUPPORTED_HEAD_DIM(D);
  }
}

}  // namespace golinear::kernels::cuda

// DeviceBuffer and the other owners of device resources, reachable from here as before.
#include "kernels/cuda/device_resources.h"
