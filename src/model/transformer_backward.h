// Backward through the frozen transformer, for end-to-end distillation (DESIGN.md §4 stage 2):
// the base weights receive no gradient; each layer's mixer receives dy through Mixer::backward,
// which accumulates its parameter gradients and returns the gradients of its inputs so the
// backward continues through q/k/v projections, norms, RoPE (inside the mixer), SwiGLU and the
// residual stream. LoRA adapters of the model (model.lora) receive their gradients too.
// Gradient convention: parameters +=.
#pragma once

#include "model/transformer.h"

namespace golinear {

// `trace` must come from model_forward(..., trace) with capture_activations over the same ids.
// dlogits (T, V): gradient of the loss with respect to every position's logits.
void model_backward(Model& model, int T, const ForwardTrace& trace, const float* dlogits);

}  // namespace golinear
