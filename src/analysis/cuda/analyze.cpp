#include "analysis/cuda/analyze.h"

#include <memory>

#include "kernels/cuda/device_resources.h"
#include "kernels/cuda/loss.h"

namespace golinear::analysis::cuda {

namespace {

// Device ids, logits and per-row NLL, grown to the longest sequence seen.
struct NllBuffers {
  kernels::cuda::DeviceBuffer<int32_t> ids;
  kernels::cuda::DeviceBuffer<float> logits;
  kernels::cuda::DeviceBuffer<double> nll;
  std::vector<double> host;
};

}  // namespace

analysis::SequenceNll gpu_sequence_nll(golinear::model::cuda::GpuModel& model) {
  auto buffers = std::make_shared<NllBuffers>();
  return [&model, buffers](const int32_t* ids, int T) -> Result<double> {
    if (T < 2) return make_error("sensitivity: a sequence of ", T, " tokens has nothing to predict");
    if (model.lora()) return make_error("sensitivity: the GPU model carries LoRA adapters; the sensitivity needs the base");
    const size_t V = model.config().vocab_size;
    NllBuffers& b = *buffers;
    if (b.ids.size() < (size_t)T) GL_TRY(b.ids.allocate(T));
    if (b.logits.size() < (size_t)T * V) GL_TRY(b.logits.allocate((size_t)T * V));
    if (b.nll.size() < (size_t)T) GL_TRY(b.nll.allocate(T));
    cudaStream_t s = model.stream();
    GL_CUDA_CHECK(cudaMemcpyAsync(b.ids.get(), ids, (size_t)T * 4, cudaMemcpyHostToDevice, s));
    GL_TRY(model.forward_device(b.ids.get(), T, {.logits = b.logits.get()}));
    GL_TRY(kernels::cuda::next_token_nll_rows(b.nll.get(), b.logits.get(), b.ids.get(), T, (int)V, s));
    b.host.resize(T - 1);
    GL_CUDA_CHECK(cudaMemcpyAsync(b.host.data(), b.nll.get(), (size_t)(T - 1) * sizeof(double),
                                  cudaMemcpyDeviceToHost, s));
    GL_CUDA_CHECK(cudaStreamSynchronize(s));
    double nll = 0;
    for (double v : b.host) nll += v;
    return nll;
  };
}

Result<std::vector<double>> layer_sensitivity(golinear::model::cuda::GpuModel& teacher,
                                              MixerStack& student, const int32_t* tokens, long N,
                                              int T, double* teacher_ppl,
                                              const std::function<void()>& step) {
  const int L = teacher.config().num_layers;
  if ((int)student.size() != L)
    return make_error("sensitivity: a student of ", student.size(), " layers for a teacher of ", L);
  if (teacher.lora())
    return make_error("sensitivity: the GPU teacher carries LoRA adapters; the sensitivity needs the base");
  if (teacher.has_hybrid_layers())
    return make_error("sensitivity: the GPU teacher has hybrid layers; it must be every layer softmax attention");
  const analysis::LayerMixerSwap swap = [&teacher, &student](int l, bool to_student) -> Status {
    if (to_student) return teacher.set_layer_mixer(l, *student[l]);
    teacher.attach_mixer(l, nullptr);  // softmax attention again (frees the uploaded mixer)
    return ok_status();
  };
  return analysis::layer_sensitivity(gpu_sequence_nll(teacher), swap, student, tokens, N, T,
                                     teacher_ppl, step);
}

}  // namespace golinear::analysis::cuda
