// Owners of the CUDA backend's device resources, one class per kind, each released with the
// object (errors on release are ignored: nothing to report from a destructor, and a device reset
// may already have released it). Acquisition reports errors as Status through GL_CUDA_CHECK /
// GL_CUBLAS_CHECK (cuda_common.h).
//   DeviceBuffer<T>  n elements of T (one cudaMalloc)
//   DeviceArena      device memory in pieces, freed together
//   CudaStream       a non-blocking stream
//   CudaEvent        an event without timing
//   CublasHandle     a cuBLAS handle with a workspace of its own (gemm.h)
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "common/result.h"
#include "kernels/cuda/cuda_common.h"

namespace golinear::kernels::cuda {

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

// Device memory owned in pieces (plain cudaMalloc), freed together. An allocation that fails
// reports "out of GPU memory" and leaves no sticky error behind.
class DeviceArena {
 public:
  DeviceArena() = default;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena() { clear(); }
  template <class T>
  Result<T*> alloc(size_t n) {
    GL_ASSIGN_OR_RETURN(void* p, alloc_bytes(n * sizeof(T)));
    return static_cast<T*>(p);
  }
  Result<void*> alloc_bytes(size_t bytes);
  void clear();
  size_t bytes() const { return bytes_; }

 private:
  std::vector<void*> blocks_;
  size_t bytes_ = 0;
};

// A non-blocking CUDA stream owned (destroyed with the object).
class CudaStream {
 public:
  CudaStream() = default;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  ~CudaStream();
  // priority: the device's highest (greatest) priority when true, else the default.
  Status create(bool highest_priority);
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// A CUDA event without timing, owned.
class CudaEvent {
 public:
  CudaEvent() = default;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  ~CudaEvent();
  Status create();
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// A cuBLAS handle with a workspace of its own (gemm.h: gemm_use_workspace), destroyed with the
// object.
class CublasHandle {
 public:
  CublasHandle() = default;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle();
  Status create();
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;  // kCublasWorkspaceBytes (gemm.h), its own
};

}  // namespace golinear::kernels::cuda
