// A linearized checkpoint is the base checkpoint directory plus two files (DESIGN.md §4):
//   linearization.json         the recipe (mixer options), the mixer of every layer ("softmax" for
//                              layers kept full), the base shapes it was made for, training notes;
//   linearization.safetensors  the new parameters, "layers.<l>.<name>" (fp32): the mixers', and
//                              the LoRA adapters' "layers.<l>.lora_<q|k|v|o>_<A|B>" when the
//                              recipe has LoRA (json "lora": rank, alpha, scale, targets).
// model_load() applies them when present; a recipe that does not fit the base model, or a file
// that lacks, adds or misshapes a parameter, is refused with the reason.
//
// An adapter is those two files alone, in a directory of their own: linearization.json's "base"
// also records where the base checkpoint is ("path": absolute, or relative to the adapter's
// directory) and its fingerprint (io/checkpoint.h's checkpoint_fingerprint). model_directory_resolve
// finds the base of a MODEL directory and checks the fingerprint; every loader goes through it.
#pragma once

#include <optional>
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

// An adapter's base checkpoint, as linearization.json's "base" records it.
struct BaseReference {
  std::string path;  // absolute, or relative to the adapter's directory
  Json fingerprint;  // checkpoint_fingerprint of the base when the adapter was written
};

struct LinearizationRecipe {
  mixers::MixerOptions options;
  LayerBudgets budgets;
  std::vector<std::string> layer_mixers;  // per layer: to_string(options.kind) or "softmax"
  LoraOptions lora;                       // rank 0: none; else on every non-softmax layer
  Json training = Json::object();         // free-form notes written by `linearize`
  std::optional<BaseReference> base;      // an adapter's base; none when the directory holds it
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

// What a MODEL directory stands for: a checkpoint (base = linearization = the directory; no
// linearization when it has no linearization.json), or an adapter (base elsewhere).
struct ModelDirectory {
  std::string base;           // holds config.json, the tokenizer files and the weights
  std::string linearization;  // holds linearization.{json,safetensors}; empty for a plain checkpoint
  std::string base_recorded;  // an adapter's base path as recorded; empty when not an adapter
  std::string base_sha256;    // an adapter's base fingerprint ("sha256" of checkpoint_fingerprint)
  bool is_adapter() const { return !base_recorded.empty(); }
};

// Resolves `dir`: an adapter's base path (relative ones against `dir`) must exist, be a plain
// checkpoint and have the recorded fingerprint (otherwise one line naming both directories and
// what differs); an adapter must not hold checkpoint files of its own.
Result<ModelDirectory> model_directory_resolve(const std::string& dir);

// The reference an adapter written to `adapter_dir` records for the checkpoint `base_dir`: its
// path as given when absolute, else rewritten relative to `adapter_dir` (lexically, so that the
// two directories can move together), and its fingerprint.
Result<BaseReference> base_reference_make(const std::string& base_dir, const std::string& adapter_dir);

// Checks that `base_dir` is the checkpoint `reference` was taken from (`what` names the
// adapter in the error).
Status base_reference_check(const BaseReference& reference, const std::string& base_dir,
                            const std::string& what);

}  // namespace golinear
