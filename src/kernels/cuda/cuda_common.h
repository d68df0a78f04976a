// Shared pieces of the CUDA backend: the error idiom (every CUDA and cuBLAS call checked, errors
// returned as golinear::Status naming the call, file and line), bf16 helpers, a device buffer.
//
// Storage is bf16 (__nv_bfloat16) for activations and weights, fp32 for states, gradients of
// parameters and anything accumulated; arithmetic accumulates in fp32.
// Gradient convention of every backward in kernels/cuda: gradients are WRITTEN (=) unless the
// launcher's comment says "+=" (parameter gradients accumulate across calls).
#pragma once

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

}  // namespace golinear::kernels::cuda

// Returns a golinear::Error from the enclosing function when a CUDA runtime call fails.
#define GL_CUDA_CHECK(expr)                                                                  \
  do {                                                                                       \
    const cudaError_t gl_cuda_code_ = (expr);                                                \
    if (gl_cuda_code_ != cudaSuccess)                                                        \
      return ::golinear::kernels::cuda::cuda_error(gl_cuda_code_, #expr, __FILE__, __LINE__); \
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

// An owning device allocation of n elements of T (plain cudaMalloc, never managed memory).
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(ptr_, other.ptr_);
    std::swap(size_, other.size_);
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);  // nothing to report from a destructor
  }
  Status allocate(size_t n) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    size_ = 0;
    if (n == 0) return ok_status();
    GL_CUDA_CHECK(cudaMalloc(&ptr_, n * sizeof(T)));
    size_ = n;
    return ok_status();
  }
  T* get() const { return ptr_; }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }

 private:
  T* ptr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace golinear::kernels::cuda
