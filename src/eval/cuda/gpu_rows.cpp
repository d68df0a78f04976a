#include "eval/cuda/gpu_rows.h"

#include <memory>

namespace golinear::eval::cuda {

namespace {

// Device ids and logits, grown to the longest input seen.
struct RowsBuffers {
  kernels::cuda::DeviceBuffer<int32_t> ids;
  kernels::cuda::DeviceBuffer<float> logits;
};

}  // namespace

eval::RowsForward gpu_rows_forward(golinear::model::cuda::GpuModel& model) {
  auto buffers = std::make_shared<RowsBuffers>();
  return [&model, buffers](const int32_t* ids, int T, int first_row, float* rows) -> Status {
    if (T <= 0 || first_row < 0 || first_row >= T)
      return make_error("gpu rows: rows [", first_row, ", ", T, ") of ", T, " tokens");
    const size_t V = model.config().vocab_size;
    if (buffers->ids.size() < (size_t)T) GL_TRY(buffers->ids.allocate(T));
    if (buffers->logits.size() < (size_t)T * V) GL_TRY(buffers->logits.allocate((size_t)T * V));
    cudaStream_t s = model.stream();
    GL_CUDA_CHECK(cudaMemcpyAsync(buffers->ids.get(), ids, (size_t)T * 4, cudaMemcpyHostToDevice, s));
    GL_TRY(model.forward_device(buffers->ids.get(), T, {.logits = buffers->logits.get()}));
    GL_CUDA_CHECK(cudaMemcpyAsync(rows, buffers->logits.get() + (size_t)first_row * V,
                                  (size_t)(T - first_row) * V * 4, cudaMemcpyDeviceToHost, s));
    GL_CUDA_CHECK(cudaStreamSynchronize(s));
    return ok_status();
  };
}

}  // namespace golinear::eval::cuda
