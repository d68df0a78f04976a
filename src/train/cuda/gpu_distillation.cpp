#include "train/cuda/gpu_distillation.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "kernels/cuda/loss.h"
#include "mixers/cuda/hybrid_mixer.h"
#include "model/cuda/gpu_model.h"
#include "model/cuda/transformer_backward.h"
#include "train/cuda/gpu_train_util.h"
#include "train/distillation.h"
#include "train/optimizer.h"

namespace golinear::train::cuda {

namespace kc = kernels::cuda;
using mixers::cuda::GpuHybridMixer;
using mixers::cuda::HybridIO;
using mixers::cuda::HybridScratch;

namespace {

// The frozen backbone on the device (a GpuModel of the teacher: every layer softmax attention),
// the trained layers' GPU mixers (attached to the model for the student's pass, their parameters
// and gradients in one flat buffer) and one sequence's activations. It only orchestrates: the
// layer loop is GpuModel::forward_device, the backward of the frozen network gpu_model_backward,
// the mixers' forward and backward mixers/cuda.
class Distiller {
 public:
  ~Distiller() {
    if (gm_ && lora_) gm_->attach_lora(nullptr);  // the backbone may outlive the trainer
  }
  // `lora`: the student's LoRA adapters (model/lora.h), trained with the mixers, or null.
  Status init(const Model& model, MixerStack& students, int T,
              std::shared_ptr<golinear::model::cuda::GpuModel> backbone, const LoraAdapters* lora);
  // Uploads the students' parameters (after a resume, before training).
  Status upload(MixerStack& students, const LoraAdapters* lora);
  // One sequence: KL (mean over tokens) returned; parameter gradients += scale · ∂KL/∂θ.
  Result<double> accumulate(const int32_t* host_ids, float scale);

  const std::vector<int>& trained() const { return trained_; }
  std::vector<GpuHybridMixer>& layers() { return hybrid_; }
  long parameter_count() const { return P_; }
  long mixer_parameter_count() const { return P_mixers_; }
  golinear::model::cuda::GpuLora* lora() const { return lora_.get(); }
  float* value() const { return value_.get(); }
  float* grad() const { return grad_.get(); }
  cudaStream_t stream() const { return gm_->stream(); }

 private:
  // The model with the students attached (student) or every layer softmax (the teacher).
  Status attach_students(bool on);

  int T_ = 0;
  std::shared_ptr<golinear::model::cuda::GpuModel> gm_;
  std::vector<int> trained_;
  mixers::MixerOptions recipe_;
  std::vector<GpuHybridMixer> hybrid_;
  HybridScratch scratch_;  // the mixers' training forward and backward, layer by layer
  // The LoRA adapters, their values and gradients after the mixers' in the flat buffers; attached
  // to the backbone for the whole run (the teacher pass, all softmax, runs without them).
  std::unique_ptr<golinear::model::cuda::GpuLora> lora_;
  long P_ = 0, P_mixers_ = 0;
  kc::DeviceBuffer<float> value_, grad_;
  std::unique_ptr<golinear::model::cuda::GpuActivations> acts_;
  std::unique_ptr<golinear::model::cuda::GpuBackwardScratch> backward_scratch_;
  kc::DeviceBuffer<int32_t> ids_;
  kc::DeviceBuffer<float> logits_, teacher_logits_, dlogits_;  // (T, V)
  kc::DeviceBuffer<double> kl_;                                 // (T)
  std::vector<double> host_kl_;
};

Status Distiller::init(const Model& model, MixerStack& students, int T,
                       std::shared_ptr<golinear::model::cuda::GpuModel> backbone,
                       const LoraAdapters* lora) {
  const ModelConfig& c = model.config;
  const int L = c.num_layers;
  T_ = T;
  if (T <= 0) return make_error("GPU distillation: no tokens per sequence");
  if ((int)students.size() != L || (int)model.mixers.size() != L)
    return make_error("GPU distillation: ", students.size(), " student mixers for ", L, " layers");
  for (int l = 0; l < L; ++l)
    if (model.mixers[l]->kind() != "softmax")
      return make_error("GPU distillation: the teacher's layer ", l, " is '", model.mixers[l]->kind(),
                        "', not softmax attention");
  const mixers::AttentionShape shape = model.attention_shape();
  GL_ASSIGN_OR_RETURN(GpuTrainedLayers selected, gpu_trained_layers(students, "GPU distillation"));
  trained_ = std::move(selected.layers);
  recipe_ = selected.recipe;
  if (backbone) {
    gm_ = std::move(backbone);
    if (gm_->has_hybrid_layers() || gm_->lora())
      return make_error("GPU distillation: the teacher on the GPU has linearized layers or LoRA adapters");
  } else {
    GL_ASSIGN_OR_RETURN(gm_, golinear::model::cuda::gpu_model_upload(model));
  }

  // The trained layers: one flat parameter / gradient buffer.
  const long per_layer = mixers::cuda::hybrid_parameter_count(recipe_, shape);
  P_mixers_ = per_layer * (long)trained_.size();
  const bool with_lora = lora && lora->enabled();
  P_ = P_mixers_ + (with_lora ? golinear::model::cuda::GpuLora::parameter_count(*lora) : 0);
  GL_TRY(value_.allocate(P_));
  GL_TRY(grad_.allocate(P_));
  GL_CUDA_CHECK(cudaMemset(grad_.get(), 0, P_ * 4));
  for (size_t i = 0; i < trained_.size(); ++i) {
    GL_ASSIGN_OR_RETURN(GpuHybridMixer layer,
                        GpuHybridMixer::create(selected.options[i], shape, model.inv_freq, value_.get() + i * per_layer,
                                               grad_.get() + i * per_layer));
    hybrid_.push_back(std::move(layer));
  }
  if (with_lora) {
    GL_ASSIGN_OR_RETURN(lora_, golinear::model::cuda::GpuLora::create(c, *lora, value_.get() + P_mixers_,
                                                                      grad_.get() + P_mixers_));
    gm_->attach_lora(lora_.get());  // before the backward scratch, which makes room for it
  }
  GL_TRY(scratch_.reserve(selected.scratch_bytes(shape, T)));
  GL_ASSIGN_OR_RETURN(acts_, golinear::model::cuda::gpu_activations_allocate(*gm_, T));
  GL_ASSIGN_OR_RETURN(backward_scratch_, golinear::model::cuda::GpuBackwardScratch::create(*gm_, T));
  const size_t V = c.vocab_size;
  GL_TRY(ids_.allocate(T));
  GL_TRY(logits_.allocate((size_t)T * V));
  GL_TRY(teacher_logits_.allocate((size_t)T * V));
  GL_TRY(dlogits_.allocate((size_t)T * V));
  GL_TRY(kl_.allocate(T));
  host_kl_.assign(T, 0.0);
  // The memsets above ran on the legacy stream, which the model's non-blocking stream does not
  // wait for.
  GL_CUDA_CHECK(cudaDeviceSynchronize());
  return ok_status();
}

Status Distiller::upload(MixerStack& students, const LoraAdapters* lora) {
  for (size_t i = 0; i < trained_.size(); ++i) GL_TRY(hybrid_[i].upload(*students[trained_[i]], stream()));
  if (lora_) GL_TRY(lora_->upload(*lora, stream()));
  return ok_status();
}

Status Distiller::attach_students(bool on) {
  for (size_t i = 0; i < trained_.size(); ++i) gm_->attach_mixer(trained_[i], on ? &hybrid_[i] : nullptr);
  return ok_status();
}

Result<double> Distiller::accumulate(const int32_t* host_ids, float scale) {
  cudaStream_t s = stream();
  const int T = T_, V = gm_->config().vocab_size;
  GL_CUDA_CHECK(cudaMemcpyAsync(ids_.get(), host_ids, (size_t)T * 4, cudaMemcpyHostToDevice, s));
  // The teacher: the same backbone, every layer softmax attention.
  golinear::model::cuda::GpuForwardOptions teacher;
  teacher.logits = teacher_logits_.get();
  teacher.all_softmax = true;
  GL_TRY(gm_->forward_device(ids_.get(), T, teacher));
  // The student, keeping what the backward reads.
  GL_TRY(attach_students(true));
  golinear::model::cuda::GpuForwardOptions student;
  student.logits = logits_.get();
  student.keep = acts_.get();
  GL_TRY(gm_->forward_device(ids_.get(), T, student));
  // KL per token and ∂/∂student logits = (p_S − p_T) · scale / T, then the network's backward;
  // each trained mixer recomputes its forward's intermediates and adds its parameter gradients.
  GL_TRY(kc::kl_rows_forward_backward(kl_.get(), dlogits_.get(), teacher_logits_.get(),
                                      logits_.get(), T, V, scale / T, s));
  auto mixer_backward = [&](int layer, const float* dy, float* dx, float* dq, float* dk,
                            float* dv) -> Status {
    const auto it = std::find(trained_.begin(), trained_.end(), layer);
    if (it == trained_.end()) return make_error("GPU distillation: layer ", layer, " is not trained");
    GpuHybridMixer& mixer = hybrid_[it - trained_.begin()];
    const golinear::model::cuda::GpuLayerActivations& A = acts_->layers[layer];
    const HybridIO in{T, A.xn, A.q, A.k, A.v};
    GL_TRY(mixer.forward_train(scratch_, in, nullptr, gm_->cublas(), s));
    return mixer.backward(scratch_, in, dy, gm_->cublas(), s, dx, dq, dk, dv);
  };
  GL_TRY(golinear::model::cuda::gpu_model_backward(*gm_, *acts_, dlogits_.get(), mixer_backward,
                                            *backward_scratch_));
  GL_TRY(attach_students(false));
  GL_CUDA_CHECK(cudaMemcpyAsync(host_kl_.data(), kl_.get(), (size_t)T * 8, cudaMemcpyDeviceToHost, s));
  GL_CUDA_CHECK(cudaStreamSynchronize(s));
  double total = 0;
  for (double x : host_kl_) total += x;
  return total / T;
}

}  // namespace

Result<double> gpu_distill_sequence_gradient(const Model& model, MixerStack& students,
                                             const int32_t* ids, int T, float scale,
                                             LoraAdapters* lora) {
  Distiller d;
  GL_TRY(d.init(model, students, T, nullptr, lora));
  GL_TRY(d.upload(students, lora));
  GL_ASSIGN_OR_RETURN(double kl, d.accumulate(ids, scale));
  for (size_t i = 0; i < d.trained().size(); ++i)
    GL_TRY(d.layers()[i].download_grads(*students[d.trained()[i]], d.stream()));
  if (d.lora()) GL_TRY(d.lora()->download_grads(*lora, d.stream()));
  return kl;
}

Result<TrainReport> gpu_distill_end_to_end(const Model& model, MixerStack& students,
                                           const PackedDataset& data, const TrainOptions& options,
                                           std::shared_ptr<golinear::model::cuda::GpuModel> backbone,
                                           LoraAdapters* lora) {
  const int T = data.seq_len;
  if (data.size() == 0) return make_error("distillation: no training sequences");
  if (lora && !lora->enabled()) lora = nullptr;
  Distiller d;
  GL_TRY(d.init(model, students, T, std::move(backbone), lora));
  const long P = d.parameter_count();
  const std::vector<int>& trained = d.trained();
  GpuAdamW adamw;
  GL_TRY(adamw.allocate(P));
  cudaStream_t stream = d.stream();

  // The CPU optimizer only carries the moments for checkpoints (the CPU trainer's format).
  AdamW cpu_optimizer(distillation_parameters(students, lora), options.adam);
  GL_ASSIGN_OR_RETURN(std::vector<FlatPiece> pieces,
                      flat_pieces(students, trained, d.mixer_parameter_count() / (long)trained.size(), "GPU distillation"));
  if (d.lora()) {  // the adapters follow the mixers in both orders, in the same order
    long cpu_mixers = 0;
    for (mixers::Parameter* p : trainable_parameters(students)) cpu_mixers += (long)p->value.size();
    pieces.push_back({cpu_mixers, d.mixer_parameter_count(), P - d.mixer_parameter_count()});
  }
  long adam_t = 0;

  auto download = [&]() -> Status {
    for (size_t i = 0; i < trained.size(); ++i) GL_TRY(d.layers()[i].download(*students[trained[i]], stream));
    if (d.lora()) GL_TRY(d.lora()->download(*lora, stream));
    return ok_status();
  };
  auto save_state = [&](long step) -> Status {
    GL_TRY(download());
    return gpu_train_save(options, students, cpu_optimizer, pieces, P, adamw.m(), adamw.v(), adam_t, step, lora);
  };

  const float scale = 1.0f / (float)options.batch;
  TrainLoop loop;
  loop.label = "distill (cuda)";
  loop.loss_name = "kl";
  loop.tokens_per_step = (long)options.batch * T;
  loop.resume = [&]() -> Result<long> {
    GL_ASSIGN_OR_RETURN(const long start, gpu_train_resume(options, students, cpu_optimizer, pieces, P, adamw.m(), adamw.v(), lora));
    adam_t = cpu_optimizer.steps_taken();
    GL_TRY(d.upload(students, lora));
    return start;
  };
  loop.step = [&](long step, float lr) -> Result<std::vector<StepLoss>> {
    double loss = 0.0;
    for (int b = 0; b < options.batch; ++b) {
      const int32_t* ids = data.sequence((step * options.batch + b) % data.size());
      GL_ASSIGN_OR_RETURN(double kl, d.accumulate(ids, scale));
      loss += kl;
    }
    loss /= options.batch;
    GL_TRY(gpu_apply_nan_fault(options, step, students, pieces, d.grad(), stream));
    GL_TRY(adamw.step(d.value(), d.grad(), lr, options.adam, ++adam_t, d.layers(), stream));
    if (d.lora()) GL_TRY(d.lora()->refresh(stream));  // the bf16 operands of the new values
    StepLoss out{loss, {}};
    GL_ASSIGN_OR_RETURN(const float norm, adamw.norm(stream));
    if (!std::isfinite(norm)) {  // no update was made; the loop stops naming the layer
      GL_ASSIGN_OR_RETURN(out.nonfinite_gradient_layer,
                          gpu_nonfinite_gradient_layer(d.layers(), trained, students, d.lora(), lora, stream));
    }
    return std::vector<StepLoss>{std::move(out)};
  };
  loop.save = [&](long steps_done) -> Status {
    if (options.state_path.empty()) return ok_status();
    return save_state(steps_done);
  };
  loop.finish = [&]() -> Status {
    GL_CUDA_CHECK(cudaDeviceSynchronize());
    return ok_status();
  };
  GL_ASSIGN_OR_RETURN(std::vector<TrainReport> reports, train_loop_run(options, loop));
  GL_TRY(download());
  return std::move(reports[0]);
}

}  // namespace golinear::train::cuda
