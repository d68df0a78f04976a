// LoRA on the frozen attention projections (DESIGN.md §4, the paper's Table 3 alternative to the
// short convolution), trained by the end-to-end distillation stage only. For a target
// p ∈ {q, k, v, o} of an adapted layer, with W (out, in) the frozen weight:
//   y = x Wᵀ (+ bias) + s · (x Aᵀ) Bᵀ,   A (r, in), B (out, r),   s = alpha / r (PEFT's scale)
// A starts Kaiming-uniform as in PEFT (U(−1/√in, 1/√in)), B = 0: the model is unchanged at init.
// For q, k, v the delta joins the projection's output (with its bias), before the Qwen3 q/k norm;
// o adapts o_proj of the mixer output. Only linearized layers carry adapters: layers kept as
// softmax attention stay exactly the base model's.
//
// Gradient convention (as kernels/cpu): parameters +=, activations +=.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "mixers/mixer.h"

namespace golinear {

struct Model;

// The projections LoRA can adapt, in this order everywhere (file names, GPU layout).
enum class LoraTarget { q = 0, k = 1, v = 2, o = 3 };
inline constexpr int kLoraTargets = 4;
const char* to_string(LoraTarget target);  // "q", "k", "v", "o"

struct LoraOptions {
  int rank = 0;        // r; 0: no LoRA
  float alpha = 0.0f;  // scale s = alpha / r; the default alpha = r gives s = 1
  std::array<bool, kLoraTargets> targets = {true, true, true, true};

  bool enabled() const { return rank > 0; }
  float scale() const { return alpha / (float)rank; }
  std::vector<std::string> target_names() const;
};

// Rank in [1, 64], alpha > 0, at least one target.
Status lora_options_validate(const LoraOptions& options);
// "q,k,v,o" (any non-empty subset, no repeats) → targets.
Result<std::array<bool, kLoraTargets>> lora_targets_parse(const std::string& text);

// One layer's adapters: per target A (r, in), B (out, r) as trainable parameters named
// "lora_<p>_A" / "lora_<p>_B"; both empty for a target not adapted.
struct LoraLayer {
  std::array<mixers::Parameter, kLoraTargets> A, B;
  bool adapted = false;  // false: a layer without adapters (kept as softmax attention)
  std::vector<mixers::Parameter*> parameters();
  std::vector<const mixers::Parameter*> parameters() const;
  const mixers::Parameter& a(LoraTarget t) const { return A[(int)t]; }
  const mixers::Parameter& b(LoraTarget t) const { return B[(int)t]; }
  bool has(LoraTarget t) const { return adapted && !A[(int)t].value.empty(); }
};

// Every layer's adapters (one LoraLayer per model layer), or none (options.rank == 0).
struct LoraAdapters {
  LoraOptions options;
  std::vector<LoraLayer> layers;
  bool enabled() const { return options.enabled() && !layers.empty(); }
  // Every trainable parameter, layer by layer, in target order (A then B).
  std::vector<mixers::Parameter*> parameters();
  std::vector<const mixers::Parameter*> parameters() const;
  // Parameters with their layer: ("layers.<l>.lora_q_A", parameter), as saved.
  std::vector<std::pair<std::string, mixers::Parameter*>> named_parameters();
  std::vector<std::pair<std::string, const mixers::Parameter*>> named_parameters() const;
};

// Fresh adapters for `model` on the layers with `adapted[l]`: A Kaiming-uniform from `seed`
// (layer l with seed + l), B = 0.
Result<LoraAdapters> lora_create(const Model& model, const LoraOptions& options,
                                 const std::vector<bool>& adapted, uint64_t seed);

// Input and output widths of target t's projection: q (C → H·D), k, v (C → G·D), o (H·D → C).
int lora_in_features(const Model& model, LoraTarget t);
int lora_out_features(const Model& model, LoraTarget t);

// y (T, out) += s · (x Aᵀ) Bᵀ for x (T, in).
void lora_forward(float* y, const float* x, const mixers::Parameter& A, const mixers::Parameter& B,
                  float s, int T, int in, int out);
// Given dy (T, out) of the forward above: A.grad += s · (dy B)ᵀ x, B.grad += s · dyᵀ (x Aᵀ),
// dx (T, in) += s · (dy B) A (if dx).
void lora_backward(float* dx, const float* x, const float* dy, mixers::Parameter& A,
                   mixers::Parameter& B, float s, int T, int in, int out);

// Folds model.lora into the fp32 weights (W ← W + s·B A for every adapted projection) and
// removes it: the same function in fp32, at no cost per token (the CPU inference loads).
void lora_merge_into_weights(Model& model);

}  // namespace golinear
