// The backward of the frozen transformer on the GPU (the twin of model/transformer_backward.h):
// from the gradient of the logits back through the LM head, the final norm and every layer's MLP,
// o_proj, mixer, q/k norm, [q; k; v] projections and input norm, to the residual stream. Input
// gradients only: the base weights receive none. What the forward kept (GpuActivations, from
// GpuModel::forward_device with `keep`) is read; the mixers of linearized layers are the
// caller's (a callback: e.g. the distillation trainer's GPU hybrid mixers, which accumulate
// their parameter gradients); softmax layers (teacher layers kept full) backpropagate through
// attention_backward and RoPE's transpose here. LoRA adapters attached to the model
// (GpuModel::lora, a trainer's with gradients) add their input gradients and accumulate their
// parameter gradients (+=) on the way.
//
// Gradient convention as kernels/cuda: WRITTEN (=). The frozen weights' input-gradient GEMMs take
// bf16 operands (the gradient rounded to bf16) with fp32 accumulation.
#pragma once

#include <functional>
#include <memory>

#include "model/cuda/gpu_model.h"

namespace golinear::model::cuda {

// A linearized layer's backward: given dy (T, H·D) fp32, the gradient of its output, write the
// gradients of its inputs dx (T, C), dq (T, H·D), dk, dv (T, G·D) fp32 (=).
using GpuMixerBackward = std::function<Status(int layer, const float* dy, float* dx, float* dq,
                                              float* dk, float* dv)>;

// Working memory of the backward for T tokens (independent of the layer count).
class GpuBackwardScratch {
 public:
  // With room for the model's LoRA adapters when it has them (attached before).
  static Result<std::unique_ptr<GpuBackwardScratch>> create(const GpuModel& model, int T);
  int T() const { return T_; }

 private:
  friend Status gpu_model_backward(GpuModel&, const GpuActivations&, const float*,
                                   const GpuMixerBackward&, GpuBackwardScratch&);
  int T_ = 0;
  DeviceArena memory_;
  float *dh = nullptr, *dtmp = nullptr, *dx_mix = nullptr, *dact = nullptr;  // (T, C) ×3, (T, F)
  float *dy = nullptr, *dq = nullptr, *dqr = nullptr, *dqn = nullptr;          // (T, H·D)
  float *dk = nullptr, *dkr = nullptr, *dkn = nullptr, *dv = nullptr;          // (T, G·D)
  bf16 *dlogits_bf = nullptr, *dh_bf = nullptr, *dgu = nullptr, *dqkv = nullptr;
  void* attn_ws = nullptr;
  size_t attn_ws_bytes = 0;
  GpuLoraScratch lora;  // empty (T = 0) without adapters
  int lora_rank = 0;
};

// dlogits (T, V) fp32: the gradient of the loss with respect to the logits of the forward that
// kept `acts` (the model's mixers as they were then). Layers whose mixer is a hybrid call
// `mixer_backward`; the gradient stops at layer 0's input (the embeddings are frozen). On the
// model's stream.
Status gpu_model_backward(GpuModel& model, const GpuActivations& acts, const float* dlogits,
                          const GpuMixerBackward& mixer_backward, GpuBackwardScratch& scratch);

}  // namespace golinear::model::cuda
