#include "eval/cuda/gpu_rows.h"

#include <memory>

namespace golinear::eval::cuda {

namespace {

// Device ids and logits, grown to the largest pass seen.
struct RowsBuffers {
  kernels::cuda::DeviceBuffer<int32_t> ids;
  kernels::cuda::DeviceBuffer<float> logits;
  std::vector<int32_t> packed;  // the pass's ids, one input after the other
  std::vector<int> lengths;
  std::vector<golinear::model::cuda::GpuRowRange> ranges;
};

}  // namespace

eval::RowsForward gpu_rows_forward(golinear::model::cuda::GpuModel& model) {
  auto buffers = std::make_shared<RowsBuffers>();
  return [&model, buffers](const std::vector<RowsInput>& inputs, float* rows) -> Status {
    RowsBuffers& b = *buffers;
    b.packed.clear();
    b.lengths.clear();
    b.ranges.clear();
    size_t n_rows = 0;
    for (const RowsInput& in : inputs) {
      if (in.T <= 0 || in.first_row < 0 || in.first_row >= in.T)
        return make_error("gpu rows: rows [", in.first_row, ", ", in.T, ") of ", in.T, " tokens");
      b.ranges.push_back({(int)b.packed.size() + in.first_row, in.T - in.first_row});
      b.packed.insert(b.packed.end(), in.ids, in.ids + in.T);
      b.lengths.push_back(in.T);
      n_rows += (size_t)(in.T - in.first_row);
    }
    if (inputs.empty()) return ok_status();
    const size_t T = b.packed.size(), V = model.config().vocab_size;
    if (T > (size_t)INT32_MAX) return make_error("gpu rows: a pass of ", T, " tokens");
    if (b.ids.size() < T) GL_TRY(b.ids.allocate(T));
    if (b.logits.size() < n_rows * V) GL_TRY(b.logits.allocate(n_rows * V));
    cudaStream_t s = model.stream();
    GL_CUDA_CHECK(cudaMemcpyAsync(b.ids.get(), b.packed.data(), T * 4, cudaMemcpyHostToDevice, s));
    GL_TRY(model.forward_device(b.ids.get(), (int)T,
                                {.logits = b.logits.get(), .sequences = b.lengths,
                                 .logit_rows = b.ranges}));
    GL_CUDA_CHECK(cudaMemcpyAsync(rows, b.logits.get(), n_rows * V * 4, cudaMemcpyDeviceToHost, s));
    GL_CUDA_CHECK(cudaStreamSynchronize(s));
    return ok_status();
  };
}

}  // namespace golinear::eval::cuda
