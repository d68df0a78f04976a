// A linearized checkpoint is the base checkpoint directory plus two files (DESIGN.md §4):
//   linearization.json         the recipe (mixer options), the mixer of every layer ("softmax" for
//                              layers kept full), the base shapes it was made for, training notes;
//   linearization.safetensors  the new parameters, "layers.<l>.<name>" (fp32): the mixers', and
//                              the LoRA adapters' "layers.<l>.lora_<q|k|v|o>_<A|B>" when the
//                              recipe has LoRA (json "lora": rank, alpha, scale, targets).
// model_load() applies them when present; a recipe that does not fit the base model, or a file
// that lacks, adds or misshapes a parameter, is refused with the reason.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "mixers/mixer_factory.h"
#include "model/transformer.h"

namespace golinear {

// Per-layer exact budgets: layer l attends sinks[l] + windows[l] keys exactly instead of the
// recipe's uniform sinks and window (each list empty: uniform; else one entry per layer, those of
// layers kept as softmax unused). linearization.json stores them as "layer_sinks" and
// "layer_windows" in the recipe.
struct LayerBudgets {
  std::vector<int> sinks, windows;
  bool empty() const { return sinks.empty() && windows.empty(); }
};

// The options of layer l: `options` with that layer's sinks and window from `budgets`.
mixers::MixerOptions layer_mixer_options(const mixers::MixerOptions& options,
                                         const LayerBudgets& budgets, int layer);

// Rejects lists whose length is not num_layers and entries that make a layer's options invalid.
Status layer_budgets_validate(const mixers::MixerOptions& options, const LayerBudgets& budgets,
                              int num_layers);

struct LinearizationRecipe {
  mixers::MixerOptions options;
  LayerBudgets budgets;
  std::vector<std::string> layer_mixers;  // per layer: to_string(options.kind) or "softmax"
  LoraOptions lora;                       // rank 0: none; else on every non-softmax layer
  Json training = Json::object();         // free-form notes written by `linearize`
};

// Fresh mixers for `model`: softmax attention for the layers in `keep_full`, a mixer of
// `options` (with layer l's budget) for every other (parameters initialised from `seed`, layer l
// with seed + l).
Result<MixerStack> linearized_mixers(const Model& model, const mixers::MixerOptions& options,
                                     const std::vector<int>& keep_full, uint64_t seed,
                                     const LayerBudgets& budgets = {});

// The recipe of a model's current mixers and LoRA adapters.
LinearizationRecipe linearization_recipe_of(const Model& model, const mixers::MixerOptions& options,
                                            const LayerBudgets& budgets = {});

// Writes linearization.json and linearization.safetensors of `model` into `dir`.
Status linearization_save(const Model& model, const LinearizationRecipe& recipe,
                          const std::string& dir);

// Reads dir/linearization.{json,safetensors} and installs the mixers and the LoRA adapters
// (unmerged, model.lora) into `model`.
Status linearization_apply(Model& model, const std::string& dir);

// Parses the recipe part of linearization.json (`what` names the file).
Result<LinearizationRecipe> linearization_recipe_parse(const Json& json, const ModelConfig& config,
                                                       const std::string& what);

}  // namespace golinear
