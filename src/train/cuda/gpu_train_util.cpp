#include "train/cuda/gpu_train_util.h"

#include <algorithm>
#include <limits>

#include <cuda_runtime.h>

#include "common/file.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/optimizer.h"

#include "mixers/cuda/hybrid_mixer.h"
#include "mixers/hybrid_mixer.h"
#include "train/train_loop.h"

namespace golinear::train::cuda {

Result<GpuTrainedLayers> gpu_trained_layers(const MixerStack& students, const std::string& what) {
  GpuTrainedLayers out;
  for (size_t l = 0; l < students.size(); ++l) {
    if (students[l]->kind() == "softmax") continue;
    const auto* hybrid = dynamic_cast<const mixers::HybridMixer*>(students[l].get());
    if (!hybrid)
      return make_error(what, ": layer ", l, " is '", students[l]->kind(),
                        "': only hybrid mixers or softmax (kept full) train on the GPU");
    if (Status st = mixers::cuda::hybrid_check_recipe(hybrid->options(), hybrid->shape()); !st.ok())
      return make_error("golinear linearize --device cuda: ", st.error());
    const mixers::MixerOptions& o = hybrid->options();
    if (out.layers.empty()) out.recipe = o;
    const mixers::MixerOptions& r = out.recipe;
    if (o.kind != r.kind || o.mix != r.mix || o.conv != r.conv || o.linear_rope != r.linear_rope ||
        mixers::cuda::hybrid_parameter_count(o, hybrid->shape()) !=
            mixers::cuda::hybrid_parameter_count(r, hybrid->shape()))
      return make_error(what, ": every linearized layer must share one recipe but for sinks and "
                        "window (layer ", l, " differs)");
    out.options.push_back(o);
    out.layers.push_back((int)l);
  }
  if (out.layers.empty()) return make_error(what, ": every layer is kept full, nothing to train");
  return out;
}

size_t GpuTrainedLayers::scratch_bytes(const mixers::AttentionShape& shape, int T) const {
  size_t bytes = 0;
  for (const mixers::MixerOptions& o : options)
    bytes = std::max(bytes, mixers::cuda::HybridScratch::bytes(o, shape, T, true));
  return bytes;
}

Status GpuAdamW::allocate(long P) {
  P_ = P;
  GL_TRY(m_.allocate(P));
  GL_TRY(v_.allocate(P));
  GL_TRY(norm_.allocate(1));
  GL_TRY(norm_ws_.allocate(kernels::cuda::grad_norm_workspace_bytes()));
  GL_CUDA_CHECK(cudaMemset(m_.get(), 0, P * 4));
  GL_CUDA_CHECK(cudaMemset(v_.get(), 0, P * 4));
  GL_CUDA_CHECK(cudaDeviceSynchronize());  // legacy-stream memsets; the trainers' streams do not wait
  return ok_status();
}

Status GpuAdamW::step(float* value, float* grad, float lr, const AdamWOptions& o, long t,
                      std::vector<mixers::cuda::GpuHybridMixer>& layers, cudaStream_t stream) {
  namespace kc = kernels::cuda;
  GL_TRY(kc::grad_norm(norm_.get(), grad, P_, norm_ws_.get(), norm_ws_.size(), stream));
  const kc::AdamWStep adam{lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.clip_norm, t};
  GL_TRY(kc::adamw_step(value, grad, m_.get(), v_.get(), P_, norm_.get(), adam, stream));
  for (mixers::cuda::GpuHybridMixer& layer : layers) GL_TRY(layer.refresh_gates(stream));
  return ok_status();
}

Result<float> GpuAdamW::norm(cudaStream_t stream) const {
  float host = 0;
  GL_CUDA_CHECK(cudaMemcpyAsync(&host, norm_.get(), sizeof(float), cudaMemcpyDeviceToHost, stream));
  GL_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

Status gpu_apply_nan_fault(const TrainOptions& options, long step, MixerStack& students,
                           const std::vector<FlatPiece>& pieces, float* grad, cudaStream_t stream) {
  const NanFault& fault = options.nan_fault;
  if (fault.step != step + 1 || fault.layer < 0 || fault.layer >= (int)students.size() ||
      students[fault.layer]->parameters().empty())
    return ok_status();
  long cpu_offset = 0;  // the layer's first parameter in the CPU optimizer's flat order
  for (int l = 0; l < fault.layer; ++l)
    for (const mixers::Parameter* p : students[l]->parameters()) cpu_offset += (long)p->value.size();
  static const float kNan = std::numeric_limits<float>::quiet_NaN();
  for (const FlatPiece& p : pieces)  // none for a layer that is not trained
    if (p.cpu_offset == cpu_offset)
      GL_CUDA_CHECK(cudaMemcpyAsync(grad + p.gpu_offset, &kNan, sizeof(float), cudaMemcpyHostToDevice, stream));
  return ok_status();
}

Result<int> gpu_nonfinite_gradient_layer(const std::vector<mixers::cuda::GpuHybridMixer>& layers,
                                         const std::vector<int>& trained, MixerStack& students,
                                         const golinear::model::cuda::GpuLora* gpu_lora,
                                         LoraAdapters* lora, cudaStream_t stream) {
  for (size_t i = 0; i < trained.size(); ++i) GL_TRY(layers[i].download_grads(*students[trained[i]], stream));
  if (gpu_lora && lora) GL_TRY(gpu_lora->download_grads(*lora, stream));
  const int layer = first_nonfinite_gradient_layer(students, gpu_lora ? lora : nullptr);
  return layer >= 0 ? layer : kNonfiniteGradientNorm;
}

Result<std::vector<FlatPiece>> flat_pieces(MixerStack& students, const std::vector<int>& trained,
                                           long per_layer, const std::string& what) {
  std::vector<FlatPiece> pieces;
  long cpu = 0;
  for (size_t l = 0; l < students.size(); ++l) {
    const auto it = std::find(trained.begin(), trained.end(), (int)l);
    const std::vector<mixers::Parameter*> params = students[l]->parameters();
    if (it == trained.end()) {
      for (const mixers::Parameter* p : params) cpu += (long)p->value.size();
      continue;
    }
    const long block = (long)(it - trained.begin()) * per_layer;
    auto* hybrid = dynamic_cast<mixers::HybridMixer*>(students[l].get());
    if (!hybrid) return make_error(what, ": layer ", l, " is not a hybrid mixer");
    const auto layout = mixers::cuda::hybrid_layout(hybrid->options(), hybrid->shape());
    for (const mixers::Parameter* p : params) {
      const mixers::cuda::GpuParamSlot* slot = nullptr;
      for (const auto& s : layout)
        if (s.name == p->name) slot = &s;
      if (!slot || slot->count != (long)p->value.size())
        return make_error(what, ": layer ", l, " parameter '", p->name, "' has no place in the GPU layout");
      pieces.push_back({cpu, block + slot->offset, slot->count});
      cpu += slot->count;
    }
  }
  return pieces;
}

Result<long> gpu_train_resume(const TrainOptions& options, MixerStack& students, AdamW& cpu_optimizer,
                              const std::vector<FlatPiece>& pieces, long P, float* m, float* v,
                              LoraAdapters* lora) {
  if (!options.resume || options.state_path.empty() || !file_exists(options.state_path)) return 0L;
  GL_ASSIGN_OR_RETURN(long start, train_state_load(options.state_path, students, cpu_optimizer, lora));
  if (start > options.steps)
    return make_error(options.state_path, ": resume state is at step ", start, " of a ", options.steps, "-step run");
  std::vector<float> host_m(P), host_v(P);
  for (const FlatPiece& p : pieces) {
    std::copy_n(cpu_optimizer.first_moments().begin() + p.cpu_offset, p.count, host_m.begin() + p.gpu_offset);
    std::copy_n(cpu_optimizer.second_moments().begin() + p.cpu_offset, p.count, host_v.begin() + p.gpu_offset);
  }
  GL_CUDA_CHECK(cudaMemcpy(m, host_m.data(), P * 4, cudaMemcpyHostToDevice));
  GL_CUDA_CHECK(cudaMemcpy(v, host_v.data(), P * 4, cudaMemcpyHostToDevice));
  // A copy from pageable memory may return before its DMA lands, and the trainers' non-blocking
  // streams do not wait for the legacy one.
  GL_CUDA_CHECK(cudaDeviceSynchronize());
  return start;
}

Status gpu_train_save(const TrainOptions& options, MixerStack& students, AdamW& cpu_optimizer,
                      const std::vector<FlatPiece>& pieces, long P, const float* m, const float* v,
                      long adam_t, long step, LoraAdapters* lora) {
  std::vector<float> host_m(P), host_v(P);
  GL_CUDA_CHECK(cudaMemcpy(host_m.data(), m, P * 4, cudaMemcpyDeviceToHost));
  GL_CUDA_CHECK(cudaMemcpy(host_v.data(), v, P * 4, cudaMemcpyDeviceToHost));
  for (const FlatPiece& p : pieces) {
    std::copy_n(host_m.begin() + p.gpu_offset, p.count, cpu_optimizer.first_moments().begin() + p.cpu_offset);
    std::copy_n(host_v.begin() + p.gpu_offset, p.count, cpu_optimizer.second_moments().begin() + p.cpu_offset);
  }
  cpu_optimizer.steps_taken() = adam_t;
  return train_state_save(options.state_path, students, cpu_optimizer, step, lora);
}

}  // namespace golinear::train::cuda
