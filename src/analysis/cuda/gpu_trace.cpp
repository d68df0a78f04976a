#include "analysis/cuda/gpu_trace.h"

#include <cstring>

namespace golinear::analysis::cuda {

using kernels::cuda::bf16;

namespace {

// n bf16 values on the device → fp32 on the host (exact: bf16 is the top half of an fp32).
Status download(std::vector<float>& out, const bf16* device, size_t n, std::vector<uint16_t>& staging,
                cudaStream_t s) {
  staging.resize(n);
  GL_CUDA_CHECK(cudaMemcpyAsync(staging.data(), device, n * 2, cudaMemcpyDeviceToHost, s));
  GL_CUDA_CHECK(cudaStreamSynchronize(s));
  out.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t bits = (uint32_t)staging[i] << 16;
    std::memcpy(&out[i], &bits, 4);
  }
  return ok_status();
}

}  // namespace

analysis::TeacherTrace gpu_teacher_trace(golinear::model::cuda::GpuModel& model) {
  return [&model](const int32_t* tokens, int T, bool mixer_io, ForwardTrace* trace) -> Status {
    if (model.has_hybrid_layers())
      return make_error("analyze: the GPU teacher has hybrid layers; the teacher must be every "
                        "layer softmax attention");
    std::vector<golinear::model::cuda::GpuLayerTrace> layers;
    GL_TRY(golinear::model::cuda::gpu_model_trace(model, tokens, T, &layers));
    const ModelConfig& c = model.config();
    const size_t C = c.hidden_size, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim;
    trace->capture_mixer_io = true;
    trace->layers.assign(layers.size(), {});
    std::vector<uint16_t> staging;
    cudaStream_t s = model.stream();
    for (size_t l = 0; l < layers.size(); ++l) {
      ForwardTrace::Layer& out = trace->layers[l];
      GL_TRY(download(out.q, layers[l].q, (size_t)T * H * D, staging, s));
      GL_TRY(download(out.k, layers[l].k, (size_t)T * G * D, staging, s));
      if (mixer_io) {
        GL_TRY(download(out.x, layers[l].x, (size_t)T * C, staging, s));
        GL_TRY(download(out.v, layers[l].v, (size_t)T * G * D, staging, s));
        GL_TRY(download(out.y, layers[l].y, (size_t)T * H * D, staging, s));
      }
    }
    return ok_status();
  };
}

}  // namespace golinear::analysis::cuda
