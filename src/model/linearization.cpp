#include "model/linearization.h"

#include <algorithm>
#include <filesystem>

#include "common/file.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "mixers/softmax_mixer.h"

namespace golinear {

namespace {

constexpr const char* kFormat = "golinear.linearization";
constexpr int kVersion = 1;

Json base_shape_json(const ModelConfig& c) {
  return {{"architecture", c.architecture}, {"num_hidden_layers", c.num_layers},
          {"hidden_size", c.hidden_size},   {"num_attention_heads", c.num_heads},
          {"num_key_value_heads", c.num_kv_heads}, {"head_dim", c.head_dim},
          {"vocab_size", c.vocab_size}};
}

// The adapter's base of linearization.json's "base" object: none when it has no "path".
Result<std::optional<BaseReference>> base_reference_parse(const Json& base, const std::string& what) {
  if (!base.contains("path")) return std::optional<BaseReference>();
  BaseReference reference;
  GL_ASSIGN_OR_RETURN(reference.path, json_get<std::string>(base, "path", what + " base"));
  if (reference.path.empty()) return make_error(what, ": base 'path' is empty");
  GL_ASSIGN_OR_RETURN(reference.fingerprint, json_get<Json>(base, "fingerprint", what + " base"));
  return std::optional<BaseReference>(std::move(reference));
}

}  // namespace

mixers::MixerOptions layer_mixer_options(const mixers::MixerOptions& options,
                                         const LayerBudgets& budgets, int layer) {
  mixers::MixerOptions o = options;
  if (!budgets.sinks.empty()) o.sinks = budgets.sinks.at(layer);
  if (!budgets.windows.empty()) o.window = budgets.windows.at(layer);
  return o;
}

Status layer_budgets_validate(const mixers::MixerOptions& options, const LayerBudgets& budgets,
                              int num_layers) {
  for (const auto& [list, name] : {std::pair{&budgets.sinks, "sinks"}, {&budgets.windows, "window"}})
    if (!list->empty() && (int)list->size() != num_layers)
      return make_error("per-layer ", name, " lists ", list->size(), " values, the model has ",
                        num_layers, " layers");
  for (int l = 0; l < num_layers && !budgets.empty(); ++l)
    if (Status st = mixers::mixer_options_validate(layer_mixer_options(options, budgets, l)); !st.ok())
      return make_error("layer ", l, ": ", st.error());
  return ok_status();
}

Result<MixerStack> linearized_mixers(const Model& model, const mixers::MixerOptions& options,
                                     const std::vector<int>& keep_full, uint64_t seed,
                                     const LayerBudgets& budgets) {
  GL_TRY(mixers::mixer_options_validate(options));
  const int L = model.config.num_layers;
  GL_TRY(layer_budgets_validate(options, budgets, L));
  for (int l : keep_full)
    if (l < 0 || l >= L)
      return make_error("keep-full layer ", l, " does not exist (the model has ", L, " layers)");
  MixerStack stack(L);
  for (int l = 0; l < L; ++l) {
    if (std::find(keep_full.begin(), keep_full.end(), l) != keep_full.end()) {
      stack[l] = std::make_unique<mixers::SoftmaxMixer>(model.attention_shape());
      continue;
    }
    GL_ASSIGN_OR_RETURN(stack[l], mixers::mixer_create(layer_mixer_options(options, budgets, l),
                                                       model.attention_shape(), seed + l));
  }
  return stack;
}

LinearizationRecipe linearization_recipe_of(const Model& model, const mixers::MixerOptions& options,
                                            const LayerBudgets& budgets) {
  LinearizationRecipe recipe;
  recipe.options = options;
  recipe.budgets = budgets;
  for (const auto& mixer : model.mixers) recipe.layer_mixers.push_back(mixer->kind());
  if (model.lora.enabled()) recipe.lora = model.lora.options;
  return recipe;
}

Status linearization_save(const Model& model, const LinearizationRecipe& recipe,
                          const std::string& dir) {
  const auto& o = recipe.options;
  Json base = base_shape_json(model.config);
  if (recipe.base) {
    base["path"] = recipe.base->path;
    base["fingerprint"] = recipe.base->fingerprint;
  }
  Json json = {
      {"format", kFormat},
      {"version", kVersion},
      {"base", base},
      {"recipe",
       {{"mixer", mixers::to_string(o.kind)}, {"mix", mixers::to_string(o.mix)},
        {"sinks", o.sinks}, {"window", o.window}, {"conv", o.conv},
        {"linear_rope", o.linear_rope}}},
      {"layers", recipe.layer_mixers},
      {"training", recipe.training},
  };
  if (!recipe.budgets.sinks.empty()) json["recipe"]["layer_sinks"] = recipe.budgets.sinks;
  if (!recipe.budgets.windows.empty()) json["recipe"]["layer_windows"] = recipe.budgets.windows;
  std::vector<TensorToWrite> tensors;
  for (auto& [name, p] : mixer_named_parameters(model.mixers))
    tensors.push_back({name, p->shape, p->value.data()});
  if (recipe.lora.enabled()) {
    const LoraOptions& lo = recipe.lora;
    if (!model.lora.enabled() || model.lora.options.rank != lo.rank)
      return make_error(dir, ": the recipe has LoRA of rank ", lo.rank, " but the model has no such adapters");
    json["lora"] = {{"rank", lo.rank}, {"alpha", lo.alpha}, {"scale", lo.scale()},
                    {"targets", lo.target_names()}};
    for (auto& [name, p] : model.lora.named_parameters())
      tensors.push_back({name, p->shape, p->value.data()});
  }
  // Weights first, the JSON last: a directory with linearization.json is complete.
  GL_TRY(safetensors_write(dir + "/linearization.safetensors", tensors,
                           {{"format", kFormat}}));
  return file_write_atomic(dir + "/linearization.json", json.dump(2) + "\n");
}

Result<LinearizationRecipe> linearization_recipe_parse(const Json& json, const ModelConfig& config,
                                                       const std::string& what) {
  GL_ASSIGN_OR_RETURN(std::string format, json_get<std::string>(json, "format", what));
  if (format != kFormat) return make_error(what, ": not a golinear linearization (format '", format, "')");
  GL_ASSIGN_OR_RETURN(int version, json_get<int>(json, "version", what));
  if (version != kVersion)
    return make_error(what, ": linearization version ", version, " is not supported (expected ", kVersion, ")");
  GL_ASSIGN_OR_RETURN(Json base, json_get<Json>(json, "base", what));
  if (!base.is_object()) return make_error(what, ": field 'base' must be an object");
  const Json expected = base_shape_json(config);
  for (const auto& [key, value] : expected.items()) {
    if (!base.contains(key) || base[key] != value)
      return make_error(what, ": made for a model with ", key, " = ",
                        base.contains(key) ? base[key].dump() : "?", ", but this model has ",
                        value.dump());
  }
  GL_ASSIGN_OR_RETURN(Json r, json_get<Json>(json, "recipe", what));
  const std::string rwhat = what + " recipe";
  LinearizationRecipe recipe;
  GL_ASSIGN_OR_RETURN(std::string kind, json_get<std::string>(r, "mixer", rwhat));
  GL_ASSIGN_OR_RETURN(recipe.options.kind, mixers::mixer_kind_parse(kind));
  GL_ASSIGN_OR_RETURN(std::string mix, json_get<std::string>(r, "mix", rwhat));
  GL_ASSIGN_OR_RETURN(recipe.options.mix, mixers::mix_kind_parse(mix));
  GL_ASSIGN_OR_RETURN(recipe.options.sinks, json_get<int>(r, "sinks", rwhat));
  GL_ASSIGN_OR_RETURN(recipe.options.window, json_get<int>(r, "window", rwhat));
  GL_ASSIGN_OR_RETURN(recipe.options.conv, json_get<bool>(r, "conv", rwhat));
  GL_ASSIGN_OR_RETURN(recipe.options.linear_rope, json_get<bool>(r, "linear_rope", rwhat));
  if (Status st = mixers::mixer_options_validate(recipe.options); !st.ok())
    return make_error(rwhat, ": ", st.error());
  GL_ASSIGN_OR_RETURN(recipe.budgets.sinks,
                      json_get_or<std::vector<int>>(r, "layer_sinks", {}, rwhat));
  GL_ASSIGN_OR_RETURN(recipe.budgets.windows,
                      json_get_or<std::vector<int>>(r, "layer_windows", {}, rwhat));
  if (Status st = layer_budgets_validate(recipe.options, recipe.budgets, config.num_layers); !st.ok())
    return make_error(rwhat, ": ", st.error());
  GL_ASSIGN_OR_RETURN(recipe.layer_mixers, json_get<std::vector<std::string>>(json, "layers", what));
  if ((int)recipe.layer_mixers.size() != config.num_layers)
    return make_error(what, ": lists ", recipe.layer_mixers.size(), " layers, the model has ",
                      config.num_layers);
  for (const std::string& m : recipe.layer_mixers)
    if (m != "softmax" && m != kind)
      return make_error(what, ": layer mixer '", m, "' is neither 'softmax' nor the recipe's '", kind, "'");
  if (json.contains("training")) recipe.training = json["training"];
  if (json.contains("lora")) {
    const Json& lj = json["lora"];
    const std::string lwhat = what + " lora";
    GL_ASSIGN_OR_RETURN(recipe.lora.rank, json_get<int>(lj, "rank", lwhat));
    GL_ASSIGN_OR_RETURN(double alpha, json_get<double>(lj, "alpha", lwhat));
    recipe.lora.alpha = (float)alpha;
    GL_ASSIGN_OR_RETURN(std::vector<std::string> targets, json_get<std::vector<std::string>>(lj, "targets", lwhat));
    std::string list;
    for (const std::string& t : targets) list += (list.empty() ? "" : ",") + t;
    auto parsed = lora_targets_parse(list);
    if (!parsed.ok()) return make_error(lwhat, ": ", parsed.error());
    recipe.lora.targets = *parsed;
    if (Status st = lora_options_validate(recipe.lora); !st.ok()) return make_error(lwhat, ": ", st.error());
  }
  GL_ASSIGN_OR_RETURN(recipe.base, base_reference_parse(base, what));
  return recipe;
}

Status linearization_apply(Model& model, const std::string& dir) {
  const std::string json_path = dir + "/linearization.json";
  const std::string weights_path = dir + "/linearization.safetensors";
  GL_ASSIGN_OR_RETURN(Json json, json_read_file(json_path));
  GL_ASSIGN_OR_RETURN(LinearizationRecipe recipe,
                      linearization_recipe_parse(json, model.config, json_path));
  std::vector<int> keep_full;
  for (int l = 0; l < (int)recipe.layer_mixers.size(); ++l)
    if (recipe.layer_mixers[l] == "softmax") keep_full.push_back(l);
  GL_ASSIGN_OR_RETURN(model.mixers,
                      linearized_mixers(model, recipe.options, keep_full, 0, recipe.budgets));
  model.lora = LoraAdapters{};
  if (recipe.lora.enabled()) {
    std::vector<bool> adapted;
    for (const std::string& m : recipe.layer_mixers) adapted.push_back(m != "softmax");
    GL_ASSIGN_OR_RETURN(model.lora, lora_create(model, recipe.lora, adapted, 0));
  }
  GL_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::open(weights_path));
  size_t expected = 0;
  for (auto& [name, p] : mixer_named_parameters(model.mixers)) {
    ++expected;
    const TensorView* t = file->find(name);
    if (!t) return make_error(weights_path, ": missing parameter '", name, "'");
    if (t->shape != p->shape)
      return make_error(weights_path, ": parameter '", name, "' has shape ",
                        shape_string(t->shape), ", the recipe needs ", shape_string(p->shape));
    GL_TRY(tensor_to_f32(*t, p->value.data(), weights_path));
  }
  for (auto& [name, p] : model.lora.named_parameters()) {
    ++expected;
    const TensorView* t = file->find(name);
    if (!t) return make_error(weights_path, ": missing LoRA parameter '", name, "'");
    if (t->shape != p->shape)
      return make_error(weights_path, ": LoRA parameter '", name, "' has shape ",
                        shape_string(t->shape), ", the recipe needs ", shape_string(p->shape));
    GL_TRY(tensor_to_f32(*t, p->value.data(), weights_path));
  }
  if (file->tensors().size() != expected)
    return make_error(weights_path, ": holds ", file->tensors().size(),
                      " tensors but the recipe has ", expected, " parameters");
  return ok_status();
}

namespace fs = std::filesystem;

Result<BaseReference> base_reference_make(const std::string& base_dir, const std::string& adapter_dir) {
  BaseReference reference;
  GL_ASSIGN_OR_RETURN(reference.fingerprint, checkpoint_fingerprint(base_dir));
  fs::path base = fs::path(base_dir).lexically_normal();
  if (!base.has_filename()) base = base.parent_path();  // "models/tiny/" → "models/tiny"
  if (base.is_absolute()) {
    reference.path = base.string();
    return reference;
  }
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (ec) return make_error(base_dir, ": cannot resolve a relative path (", ec.message(), ")");
  const fs::path from = (cwd / adapter_dir).lexically_normal();
  const fs::path to = (cwd / base).lexically_normal();
  fs::path relative = to.lexically_relative(from);
  if (relative.empty()) relative = to;
  if (!relative.has_filename()) relative = relative.parent_path();
  reference.path = relative.string();
  return reference;
}

Status base_reference_check(const BaseReference& reference, const std::string& base_dir,
                            const std::string& what) {
  GL_ASSIGN_OR_RETURN(Json actual, checkpoint_fingerprint(base_dir));
  const std::string difference = checkpoint_fingerprint_difference(reference.fingerprint, actual);
  if (!difference.empty())
    return make_error(what, ": base checkpoint ", base_dir,
                      " is not the one this adapter was made from: ", difference);
  return ok_status();
}

Result<ModelDirectory> model_directory_resolve(const std::string& dir) {
  ModelDirectory out;
  out.base = dir;
  const std::string json_path = dir + "/linearization.json";
  if (!file_exists(json_path)) return out;
  out.linearization = dir;
  GL_ASSIGN_OR_RETURN(Json json, json_read_file(json_path));
  if (!json.is_object() || !json.contains("base") || !json["base"].is_object())
    return make_error(json_path, ": field 'base' must be an object");
  GL_ASSIGN_OR_RETURN(std::optional<BaseReference> reference, base_reference_parse(json["base"], json_path));
  if (!reference) return out;  // a linearized checkpoint: the base's files are in `dir`
  for (const char* own : {"config.json", "model.safetensors", "model.safetensors.index.json"})
    if (file_exists(dir + "/" + own))
      return make_error(dir, ": an adapter (linearization.json names the base '", reference->path,
                        "') that also holds its own ", own, "; keep one or the other");
  const fs::path recorded(reference->path);
  const std::string base =
      (recorded.is_absolute() ? recorded : fs::path(dir) / recorded).lexically_normal().string();
  std::error_code ec;
  if (!fs::is_directory(base, ec))
    return make_error(json_path, ": base checkpoint '", reference->path, "' (", base,
                      ") does not exist");
  if (file_exists(base + "/linearization.json"))
    return make_error(json_path, ": base checkpoint ", base,
                      " is itself linearized; an adapter's base must be a plain checkpoint");
  GL_TRY(base_reference_check(*reference, base, str_cat("adapter ", dir)));
  out.base = base;
  out.base_recorded = reference->path;
  out.base_sha256 = reference->fingerprint.value("sha256", std::string());
  return out;
}

}  // namespace golinear
