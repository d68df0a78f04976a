// The device-resource owners (device_resources.h).
#include "kernels/cuda/device_resources.h"

#include <algorithm>

#include "kernels/cuda/gemm.h"

namespace golinear::kernels::cuda {

Result<void*> DeviceArena::alloc_bytes(size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 1));
  if (e != cudaSuccess) {
    cudaGetLastError();  // an out-of-memory is not sticky: clear it
    return make_error("out of GPU memory: cudaMalloc of ", bytes, " bytes failed (",
                      cudaGetErrorString(e), ")");
  }
  blocks_.push_back(p);
  bytes_ += bytes;
  return p;
}

void DeviceArena::clear() {
  for (void* p : blocks_) cudaFree(p);
  blocks_.clear();
  bytes_ = 0;
}

CudaStream::~CudaStream() {
  if (stream_) cudaStreamDestroy(stream_);  // nothing to report from a destructor
}

Status CudaStream::create(bool highest_priority) {
  int least = 0, greatest = 0;
  GL_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  GL_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking,
                                             highest_priority ? greatest : 0));
  return ok_status();
}

CudaEvent::~CudaEvent() {
  if (event_) cudaEventDestroy(event_);
}

Status CudaEvent::create() {
  GL_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  return ok_status();
}

CublasHandle::~CublasHandle() {
  if (handle_) {
    gemm_release_workspace(handle_);
    cublasDestroy(handle_);
  }
  if (workspace_) cudaFree(workspace_);
}

Status CublasHandle::create() {
  GL_CUBLAS_CHECK(cublasCreate(&handle_));
  // A workspace of its own (gemm.h): the pipelined transfer runs the teacher's products on
  // another stream at the same time, and cuBLAS's shared pool would then make the results differ
  // from run to run.
  GL_CUDA_CHECK(cudaMalloc(&workspace_, kCublasWorkspaceBytes));
  return gemm_use_workspace(handle_, workspace_, kCublasWorkspaceBytes);
}

}  // namespace golinear::kernels::cuda
