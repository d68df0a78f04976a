#include "train/cuda/gpu_distillation.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "common/file.h"
#include "common/progress.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rope.h"
#include "mixers/cuda/gpu_hybrid_layer.h"
#include "train/cuda/gpu_train_util.h"
#include "mixers/hybrid_mixer.h"
#include "model/cuda/gpu_model.h"
#include "train/optimizer.h"

namespace golinear::train::cuda {

namespace kc = kernels::cuda;
using golinear::cuda::DeviceArena;
using kernels::cuda::bf16;
using mixers::cuda::GpuHybridLayer;
using mixers::cuda::GpuHybridScratch;

namespace {

// The frozen backbone on the device, the trained layers, and one sequence's activations.
class Distiller {
 public:
  Status init(const Model& model, MixerStack& students, int T);
  // Uploads the students' parameters (after a resume, before training).
  Status upload(MixerStack& students);
  // One sequence: KL (mean over tokens) returned; parameter gradients += scale · ∂KL/∂θ.
  Result<double> accumulate(const int32_t* host_ids, float scale);

  const std::vector<int>& trained() const { return trained_; }
  std::vector<GpuHybridLayer>& layers() { return hybrid_; }
  long parameter_count() const { return P_; }
  float* value() const { return value_.get(); }
  float* grad() const { return grad_.get(); }
  cudaStream_t stream() const { return stream_; }

 private:
  // The frozen weights (uploaded as the GPU model's), the student's place and the saved
  // activations.
  struct Layer : golinear::cuda::GpuLayerWeights {
    int hybrid = -1;  // index into hybrid_, or −1: softmax attention (teacher or kept full)
    // Saved activations of the last forward.
    float *h_in = nullptr, *h_mid = nullptr, *q_raw = nullptr, *k_raw = nullptr, *lse = nullptr;
    bf16 *xn = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *qr = nullptr, *kr = nullptr,
         *y = nullptr, *gu = nullptr;
  };
  Status forward(bool student, float* logits);
  Status backward(float scale);

  ModelConfig c_;
  int T_ = 0, C_ = 0, H_ = 0, G_ = 0, D_ = 0, F_ = 0, V_ = 0, HD_ = 0, GD_ = 0, QKV_ = 0;
  float eps_ = 0;
  cudaStream_t stream_ = 0;  // the legacy default stream
  CublasHandle cublas_;
  DeviceArena weights_, acts_;
  bf16 *embed_ = nullptr, *lm_head_ = nullptr;
  float *final_norm_ = nullptr, *inv_freq_ = nullptr;
  std::vector<Layer> layers_;
  std::vector<int> trained_;
  mixers::MixerOptions recipe_;
  std::vector<GpuHybridLayer> hybrid_;
  GpuHybridScratch scratch_;
  long P_ = 0;
  kc::DeviceBuffer<float> value_, grad_;
  // Working buffers.
  int32_t* ids_ = nullptr;
  float *h_ = nullptr, *qkv32_ = nullptr, *h_final_ = nullptr, *logits_ = nullptr,
        *teacher_logits_ = nullptr, *dlogits_ = nullptr;
  bf16 *xn2_ = nullptr, *act_ = nullptr, *xnf_ = nullptr, *dlogits_bf_ = nullptr;
  double* kl_ = nullptr;
  float *dh_ = nullptr, *dtmp_ = nullptr, *dact_ = nullptr, *dy_ = nullptr, *dq_ = nullptr,
        *dk_ = nullptr, *dv_ = nullptr, *dqr_ = nullptr, *dkr_ = nullptr, *dqn_ = nullptr,
        *dkn_ = nullptr, *dx_mix_ = nullptr;
  bf16 *dh_bf_ = nullptr, *dgu_ = nullptr, *dqkv_ = nullptr;
  void* attn_ws_ = nullptr;
  size_t attn_ws_bytes_ = 0;
  std::vector<double> host_kl_;
};

Status Distiller::init(const Model& model, MixerStack& students, int T) {
  c_ = model.config;
  const int L = c_.num_layers;
  T_ = T, C_ = c_.hidden_size, H_ = c_.num_heads, G_ = c_.num_kv_heads, D_ = c_.head_dim;
  F_ = c_.intermediate_size, V_ = c_.vocab_size, HD_ = H_ * D_, GD_ = G_ * D_, QKV_ = HD_ + 2 * GD_;
  eps_ = (float)c_.rms_norm_eps;
  if (T <= 0) return make_error("GPU distillation: no tokens per sequence");
  if ((int)students.size() != L || (int)model.mixers.size() != L)
    return make_error("GPU distillation: ", students.size(), " student mixers for ", L, " layers");
  if (D_ != 64 && D_ != 128)
    return make_error("GPU distillation: head dim ", D_, " is not supported (64 or 128); use --device cpu");
  if (G_ <= 0 || H_ % G_ != 0) return make_error("GPU distillation: kv heads must divide the query heads");
  for (int l = 0; l < L; ++l)
    if (model.mixers[l]->kind() != "softmax")
      return make_error("GPU distillation: the teacher's layer ", l, " is '", model.mixers[l]->kind(),
                        "', not softmax attention");
  const mixers::AttentionShape shape = model.attention_shape();
  layers_.assign(L, Layer{});
  GL_ASSIGN_OR_RETURN(GpuTrainedLayers selected, gpu_trained_layers(students, "GPU distillation"));
  trained_ = std::move(selected.layers);
  recipe_ = selected.recipe;
  for (size_t i = 0; i < trained_.size(); ++i) layers_[trained_[i]].hybrid = (int)i;

  GL_TRY(cublas_.create());
  // Weights (bf16 matrices, fp32 vectors).
  auto up_bf16 = [&](const std::vector<const std::vector<float>*>& parts) {
    return golinear::cuda::upload_bf16(weights_, parts, nullptr);
  };
  auto up_f32 = [&](const std::vector<float>& x) { return golinear::cuda::upload_f32(weights_, x, nullptr); };
  GL_ASSIGN_OR_RETURN(embed_, up_bf16({&model.embed}));
  if (model.lm_head.empty()) lm_head_ = embed_;
  else {
    GL_ASSIGN_OR_RETURN(lm_head_, up_bf16({&model.lm_head}));
  }
  GL_ASSIGN_OR_RETURN(final_norm_, up_f32(model.final_norm));
  GL_ASSIGN_OR_RETURN(inv_freq_, up_f32(model.inv_freq));
  for (int l = 0; l < L; ++l)
    GL_TRY(golinear::cuda::upload_layer_weights(weights_, model.layers[l], c_, nullptr, &layers_[l]));

  // The trained layers: one flat parameter / gradient buffer.
  const long per_layer = mixers::cuda::gpu_hybrid_parameter_count(shape);
  P_ = per_layer * (long)trained_.size();
  GL_TRY(value_.allocate(P_));
  GL_TRY(grad_.allocate(P_));
  GL_CUDA_CHECK(cudaMemset(grad_.get(), 0, P_ * 4));
  for (size_t i = 0; i < trained_.size(); ++i) {
    GL_ASSIGN_OR_RETURN(GpuHybridLayer layer,
                        GpuHybridLayer::create(recipe_, shape, model.inv_freq, value_.get() + i * per_layer,
                                               grad_.get() + i * per_layer));
    hybrid_.push_back(std::move(layer));
  }
  GL_TRY(scratch_.allocate(shape, recipe_, T));

  // Activations and working buffers.
  const size_t t = T, C = C_, F = F_, V = V_, HD = HD_, GD = GD_, QKV = QKV_, H = H_;
  DeviceArena& a = acts_;
  const bool qk_norm = !model.layers[0].q_norm.empty();
  for (int l = 0; l < L; ++l) {
    Layer& d = layers_[l];
    GL_ASSIGN_OR_RETURN(d.h_in, a.alloc<float>(t * C));
    GL_ASSIGN_OR_RETURN(d.h_mid, a.alloc<float>(t * C));
    GL_ASSIGN_OR_RETURN(d.xn, a.alloc<bf16>(t * C));
    GL_ASSIGN_OR_RETURN(d.q, a.alloc<bf16>(t * HD));
    GL_ASSIGN_OR_RETURN(d.k, a.alloc<bf16>(t * GD));
    GL_ASSIGN_OR_RETURN(d.v, a.alloc<bf16>(t * GD));
    GL_ASSIGN_OR_RETURN(d.y, a.alloc<bf16>(t * HD));
    GL_ASSIGN_OR_RETURN(d.gu, a.alloc<bf16>(t * 2 * F));
    if (qk_norm) {
      GL_ASSIGN_OR_RETURN(d.q_raw, a.alloc<float>(t * HD));
      GL_ASSIGN_OR_RETURN(d.k_raw, a.alloc<float>(t * GD));
    }
    // Softmax state (the teacher pass uses it for every layer; kept-full layers in the student).
    GL_ASSIGN_OR_RETURN(d.qr, a.alloc<bf16>(t * HD));
    GL_ASSIGN_OR_RETURN(d.kr, a.alloc<bf16>(t * GD));
    GL_ASSIGN_OR_RETURN(d.lse, a.alloc<float>(t * H));
  }
  GL_ASSIGN_OR_RETURN(ids_, a.alloc<int32_t>(t));
  GL_ASSIGN_OR_RETURN(h_, a.alloc<float>(t * C));
  GL_ASSIGN_OR_RETURN(qkv32_, a.alloc<float>(t * QKV));
  GL_ASSIGN_OR_RETURN(h_final_, a.alloc<float>(t * C));
  GL_ASSIGN_OR_RETURN(logits_, a.alloc<float>(t * V));
  GL_ASSIGN_OR_RETURN(teacher_logits_, a.alloc<float>(t * V));
  GL_ASSIGN_OR_RETURN(dlogits_, a.alloc<float>(t * V));
  GL_ASSIGN_OR_RETURN(dlogits_bf_, a.alloc<bf16>(t * V));
  GL_ASSIGN_OR_RETURN(xn2_, a.alloc<bf16>(t * C));
  GL_ASSIGN_OR_RETURN(act_, a.alloc<bf16>(t * F));
  GL_ASSIGN_OR_RETURN(xnf_, a.alloc<bf16>(t * C));
  GL_ASSIGN_OR_RETURN(kl_, a.alloc<double>(t));
  GL_ASSIGN_OR_RETURN(dh_, a.alloc<float>(t * C));
  GL_ASSIGN_OR_RETURN(dtmp_, a.alloc<float>(t * C));
  GL_ASSIGN_OR_RETURN(dx_mix_, a.alloc<float>(t * C));
  GL_ASSIGN_OR_RETURN(dact_, a.alloc<float>(t * F));
  GL_ASSIGN_OR_RETURN(dy_, a.alloc<float>(t * HD));
  GL_ASSIGN_OR_RETURN(dq_, a.alloc<float>(t * HD));
  GL_ASSIGN_OR_RETURN(dqr_, a.alloc<float>(t * HD));
  GL_ASSIGN_OR_RETURN(dqn_, a.alloc<float>(t * HD));
  GL_ASSIGN_OR_RETURN(dk_, a.alloc<float>(t * GD));
  GL_ASSIGN_OR_RETURN(dkr_, a.alloc<float>(t * GD));
  GL_ASSIGN_OR_RETURN(dkn_, a.alloc<float>(t * GD));
  GL_ASSIGN_OR_RETURN(dv_, a.alloc<float>(t * GD));
  GL_ASSIGN_OR_RETURN(dh_bf_, a.alloc<bf16>(t * C));
  GL_ASSIGN_OR_RETURN(dgu_, a.alloc<bf16>(t * 2 * F));
  GL_ASSIGN_OR_RETURN(dqkv_, a.alloc<bf16>(t * QKV));
  attn_ws_bytes_ = kc::attention_backward_workspace_bytes(T, H_, G_, D_);
  GL_ASSIGN_OR_RETURN(attn_ws_, a.alloc_bytes(attn_ws_bytes_));
  host_kl_.assign(T, 0.0);
  return ok_status();
}

Status Distiller::upload(MixerStack& students) {
  for (size_t i = 0; i < trained_.size(); ++i) GL_TRY(hybrid_[i].upload(*students[trained_[i]], stream_));
  return ok_status();
}

Status Distiller::forward(bool student, float* logits) {
  const int T = T_;
  const size_t C = C_;
  cudaStream_t s = stream_;
  cublasHandle_t cb = cublas_.get();
  GL_TRY(kc::embed_gather(h_, embed_, ids_, T, C_, s));
  for (size_t l = 0; l < layers_.size(); ++l) {
    Layer& d = layers_[l];
    GL_CUDA_CHECK(cudaMemcpyAsync(d.h_in, h_, (size_t)T * C * 4, cudaMemcpyDeviceToDevice, s));
    GL_TRY(kc::rmsnorm_f32_forward(d.xn, h_, d.input_norm, T, C_, eps_, s));
    GL_TRY(kc::gemm_nt(cb, qkv32_, false, d.xn, d.w_qkv, T, QKV_, C_, 0.0f, s));
    if (d.b_qkv) GL_TRY(kc::add_bias_rows(qkv32_, d.b_qkv, T, QKV_, s));
    if (d.q_norm) {  // the raw q, k (before their per-head norm) for the norm's backward
      GL_CUDA_CHECK(cudaMemcpy2DAsync(d.q_raw, (size_t)HD_ * 4, qkv32_, (size_t)QKV_ * 4,
                                      (size_t)HD_ * 4, T, cudaMemcpyDeviceToDevice, s));
      GL_CUDA_CHECK(cudaMemcpy2DAsync(d.k_raw, (size_t)GD_ * 4, qkv32_ + HD_, (size_t)QKV_ * 4,
                                      (size_t)GD_ * 4, T, cudaMemcpyDeviceToDevice, s));
    }
    GL_TRY(kc::qkv_split(d.q, d.k, d.v, qkv32_, nullptr, d.q_norm, d.k_norm, T, H_, G_, D_, eps_, s));
    if (student && d.hybrid >= 0) {
      GL_TRY(hybrid_[d.hybrid].forward(scratch_, d.xn, d.q, d.k, d.v, cb, s));
      GL_TRY(kc::convert_f32_to_bf16(d.y, scratch_.y, (long)T * HD_, s));
    } else {
      GL_CUDA_CHECK(cudaMemcpyAsync(d.qr, d.q, (size_t)T * HD_ * 2, cudaMemcpyDeviceToDevice, s));
      GL_CUDA_CHECK(cudaMemcpyAsync(d.kr, d.k, (size_t)T * GD_ * 2, cudaMemcpyDeviceToDevice, s));
      GL_TRY(kc::rope_apply(d.qr, inv_freq_, T, H_, D_, 0, 1, s));
      GL_TRY(kc::rope_apply(d.kr, inv_freq_, T, G_, D_, 0, 1, s));
      GL_TRY(kc::attention_forward(d.y, d.lse, d.qr, d.kr, d.v, T, H_, G_, D_, kc::AttentionMaskSpec{}, s));
    }
    GL_TRY(kc::gemm_nt(cb, h_, false, d.y, d.w_o, T, C_, HD_, 1.0f, s));
    if (d.b_o) GL_TRY(kc::add_bias_rows(h_, d.b_o, T, C_, s));
    GL_CUDA_CHECK(cudaMemcpyAsync(d.h_mid, h_, (size_t)T * C * 4, cudaMemcpyDeviceToDevice, s));
    GL_TRY(kc::rmsnorm_f32_forward(xn2_, h_, d.post_norm, T, C_, eps_, s));
    GL_TRY(kc::gemm_nt(cb, d.gu, true, xn2_, d.w_gate_up, T, 2 * F_, C_, 0.0f, s));
    GL_TRY(kc::swiglu_stacked(act_, d.gu, T, F_, s));
    GL_TRY(kc::gemm_nt(cb, h_, false, act_, d.w_down, T, C_, F_, 1.0f, s));
  }
  GL_CUDA_CHECK(cudaMemcpyAsync(h_final_, h_, (size_t)T * C * 4, cudaMemcpyDeviceToDevice, s));
  GL_TRY(kc::rmsnorm_f32_forward(xnf_, h_final_, final_norm_, T, C_, eps_, s));
  return kc::gemm_nt(cb, logits, false, xnf_, lm_head_, T, V_, C_, 0.0f, s);
}

Status Distiller::backward(float scale) {
  const int T = T_;
  cudaStream_t s = stream_;
  cublasHandle_t cb = cublas_.get();
  // KL per token and ∂/∂student logits = (p_S − p_T) · scale / T.
  GL_TRY(kc::kl_rows_forward_backward(kl_, dlogits_, teacher_logits_, logits_, T, V_, scale / T, s));
  GL_TRY(kc::convert_f32_to_bf16(dlogits_bf_, dlogits_, (long)T * V_, s));
  // lm_head (input gradient only), final norm.
  GL_TRY(kc::gemm_bf16_nn(cb, dtmp_, 0.0f, dlogits_bf_, lm_head_, T, C_, V_, s));
  GL_TRY(kc::rmsnorm_backward_f32(dh_, false, dtmp_, h_final_, final_norm_, T, C_, eps_, s));
  for (int l = (int)layers_.size() - 1; l >= 0; --l) {
    Layer& d = layers_[l];
    // MLP: h_out = h_mid + down(silu(gate) ⊙ up), [gate; up] of rmsnorm(h_mid).
    GL_TRY(kc::convert_f32_to_bf16(dh_bf_, dh_, (long)T * C_, s));
    GL_TRY(kc::gemm_bf16_nn(cb, dact_, 0.0f, dh_bf_, d.w_down, T, F_, C_, s));
    GL_TRY(kc::swiglu_stacked_backward(dgu_, dact_, d.gu, T, F_, s));
    GL_TRY(kc::gemm_bf16_nn(cb, dtmp_, 0.0f, dgu_, d.w_gate_up, T, C_, 2 * F_, s));
    GL_TRY(kc::rmsnorm_backward_f32(dh_, true, dtmp_, d.h_mid, d.post_norm, T, C_, eps_, s));
    // Attention block: h_mid = h_in + o_proj(mixer(xn, q, k, v)), xn = rmsnorm(h_in).
    GL_TRY(kc::convert_f32_to_bf16(dh_bf_, dh_, (long)T * C_, s));
    GL_TRY(kc::gemm_bf16_nn(cb, dy_, 0.0f, dh_bf_, d.w_o, T, HD_, C_, s));
    if (d.hybrid >= 0) {
      GpuHybridLayer& layer = hybrid_[d.hybrid];
      GL_TRY(layer.forward(scratch_, d.xn, d.q, d.k, d.v, cb, s));  // its intermediates again
      GL_CUDA_CHECK(cudaMemcpyAsync(scratch_.dy, dy_, (size_t)T * HD_ * 4, cudaMemcpyDeviceToDevice, s));
      GL_TRY(layer.backward(scratch_, d.xn, d.q, d.k, d.v, cb, s, dx_mix_, dq_, dk_, dv_));
    } else {
      GL_TRY(kc::attention_backward(dqr_, dkr_, dv_, dy_, d.y, d.lse, d.qr, d.kr, d.v, T, H_, G_, D_,
                                    kc::AttentionMaskSpec{}, attn_ws_, attn_ws_bytes_, s));
      GL_CUDA_CHECK(cudaMemsetAsync(dq_, 0, (size_t)T * HD_ * 4, s));
      GL_CUDA_CHECK(cudaMemsetAsync(dk_, 0, (size_t)T * GD_ * 4, s));
      GL_TRY(kc::rope_backward_add_f32(dq_, dqr_, inv_freq_, T, H_, D_, 0, s));
      GL_TRY(kc::rope_backward_add_f32(dk_, dkr_, inv_freq_, T, G_, D_, 0, s));
    }
    const float* dq = dq_;
    const float* dk = dk_;
    if (d.q_norm) {  // Qwen3: per-head RMSNorm of q and k
      GL_TRY(kc::rmsnorm_backward_f32(dqn_, false, dq_, d.q_raw, d.q_norm, T * H_, D_, eps_, s));
      GL_TRY(kc::rmsnorm_backward_f32(dkn_, false, dk_, d.k_raw, d.k_norm, T * G_, D_, eps_, s));
      dq = dqn_, dk = dkn_;
    }
    GL_TRY(kc::pack_qkv_grad_bf16(dqkv_, dq, dk, dv_, T, HD_, GD_, s));
    GL_TRY(kc::gemm_bf16_nn(cb, dtmp_, 0.0f, dqkv_, d.w_qkv, T, C_, QKV_, s));
    if (d.hybrid >= 0) GL_TRY(kc::add_f32(dtmp_, dx_mix_, (long)T * C_, s));
    if (l > 0)  // below layer 0 is the frozen embedding: nothing to propagate
      GL_TRY(kc::rmsnorm_backward_f32(dh_, true, dtmp_, d.h_in, d.input_norm, T, C_, eps_, s));
  }
  return ok_status();
}

Result<double> Distiller::accumulate(const int32_t* host_ids, float scale) {
  GL_CUDA_CHECK(cudaMemcpyAsync(ids_, host_ids, (size_t)T_ * 4, cudaMemcpyHostToDevice, stream_));
  GL_TRY(forward(false, teacher_logits_));
  GL_TRY(forward(true, logits_));
  GL_TRY(backward(scale));
  GL_CUDA_CHECK(cudaMemcpyAsync(host_kl_.data(), kl_, (size_t)T_ * 8, cudaMemcpyDeviceToHost, stream_));
  GL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  double total = 0;
  for (double x : host_kl_) total += x;
  return total / T_;
}

}  // namespace

Result<double> gpu_distill_sequence_gradient(const Model& model, MixerStack& students,
                                             const int32_t* ids, int T, float scale) {
  Distiller d;
  GL_TRY(d.init(model, students, T));
  GL_TRY(d.upload(students));
  GL_ASSIGN_OR_RETURN(double kl, d.accumulate(ids, scale));
  for (size_t i = 0; i < d.trained().size(); ++i)
    GL_TRY(d.layers()[i].download_grads(*students[d.trained()[i]], d.stream()));
  return kl;
}

Result<TrainReport> gpu_distill_end_to_end(const Model& model, MixerStack& students,
                                           const PackedDataset& data, const TrainOptions& options) {
  const int T = data.seq_len;
  if (data.size() == 0) return make_error("distillation: no training sequences");
  Distiller d;
  GL_TRY(d.init(model, students, T));
  const long P = d.parameter_count();
  const std::vector<int>& trained = d.trained();
  GpuAdamW adamw;
  GL_TRY(adamw.allocate(P));
  cudaStream_t stream = d.stream();

  // The CPU optimizer only carries the moments for checkpoints (the CPU trainer's format).
  AdamW cpu_optimizer(trainable_parameters(students), options.adam);
  GL_ASSIGN_OR_RETURN(std::vector<FlatPiece> pieces, flat_pieces(students, trained, P / (long)trained.size(), "GPU distillation"));
  GL_ASSIGN_OR_RETURN(const long start, gpu_train_resume(options, students, cpu_optimizer, pieces, P, adamw.m(), adamw.v()));
  long adam_t = cpu_optimizer.steps_taken();
  GL_TRY(d.upload(students));

  auto download = [&]() -> Status {
    for (size_t i = 0; i < trained.size(); ++i) GL_TRY(d.layers()[i].download(*students[trained[i]], stream));
    return ok_status();
  };
  auto save_state = [&](long step) -> Status {
    GL_TRY(download());
    return gpu_train_save(options, students, cpu_optimizer, pieces, P, adamw.m(), adamw.v(), adam_t, step);
  };

  TrainReport report;
  report.steps_done = start;
  const long tail_from = tail_start(options);
  long tail_steps = 0, tokens_this_run = 0;
  ProgressBar bar("distill (cuda)", options.steps);
  const auto t0 = std::chrono::steady_clock::now();
  const float scale = 1.0f / (float)options.batch;
  for (long step = start; step < options.steps; ++step) {
    double loss = 0.0;
    for (int b = 0; b < options.batch; ++b) {
      const int32_t* ids = data.sequence((step * options.batch + b) % data.size());
      GL_ASSIGN_OR_RETURN(double kl, d.accumulate(ids, scale));
      loss += kl;
      tokens_this_run += T;
    }
    loss /= options.batch;
    if (!std::isfinite(loss)) return make_error("GPU distillation: the KL became ", loss, " at step ", step + 1);
    const float lr = learning_rate_at(step, options.steps, options.warmup, options.lr);
    GL_TRY(adamw.step(d.value(), d.grad(), lr, options.adam, ++adam_t, d.layers(), stream));
    report.loss_curve.push_back(loss);
    if (step >= tail_from) {
      report.final_loss += loss;
      ++tail_steps;
    }
    report.steps_done = step + 1;
    bar.update(step + 1, (double)tokens_this_run, str_cat("kl ", std::to_string(loss).substr(0, 6), " · lr ", lr));
    const StepEnd end = step_end(options, step, start);
    if (end.checkpoint && !options.state_path.empty()) GL_TRY(save_state(step + 1));
    if (end.stop) break;
  }
  GL_CUDA_CHECK(cudaDeviceSynchronize());
  bar.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  report.tokens_per_s = seconds > 0 ? tokens_this_run / seconds : 0;
  if (tail_steps) report.final_loss /= tail_steps;
  GL_TRY(download());
  return report;
}

}  // namespace golinear::train::cuda
