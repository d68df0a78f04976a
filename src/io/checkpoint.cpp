#include "io/checkpoint.h"

#include <algorithm>

#include "common/json.h"

namespace golinear {

std::vector<TensorSpec> checkpoint_tensor_specs(const ModelConfig& c) {
  const int64_t C = c.hidden_size, F = c.intermediate_size, V = c.vocab_size, D = c.head_dim;
  const int64_t QD = (int64_t)c.num_heads * D, KD = (int64_t)c.num_kv_heads * D;
  using R = TensorRole;
  std::vector<TensorSpec> specs;
  specs.push_back({"model.embed_tokens.weight", {V, C}, R::embed});
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = str_cat("model.layers.", l, ".");
    auto add = [&](const std::string& name, std::vector<int64_t> shape, R role) {
      specs.push_back({p + name, std::move(shape), role, l});
    };
    add("input_layernorm.weight", {C}, R::input_norm);
    add("self_attn.q_proj.weight", {QD, C}, R::q_proj);
    add("self_attn.k_proj.weight", {KD, C}, R::k_proj);
    add("self_attn.v_proj.weight", {KD, C}, R::v_proj);
    if (c.qkv_bias) {
      add("self_attn.q_proj.bias", {QD}, R::q_bias);
      add("self_attn.k_proj.bias", {KD}, R::k_bias);
      add("self_attn.v_proj.bias", {KD}, R::v_bias);
    }
    if (c.qk_norm) {
      add("self_attn.q_norm.weight", {D}, R::q_norm);
      add("self_attn.k_norm.weight", {D}, R::k_norm);
    }
    add("self_attn.o_proj.weight", {C, QD}, R::o_proj);
    if (c.o_bias) add("self_attn.o_proj.bias", {C}, R::o_bias);
    add("post_attention_layernorm.weight", {C}, R::post_norm);
    add("mlp.gate_proj.weight", {F, C}, R::gate_proj);
    add("mlp.up_proj.weight", {F, C}, R::up_proj);
    add("mlp.down_proj.weight", {C, F}, R::down_proj);
  }
  specs.push_back({"model.norm.weight", {C}, R::final_norm});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {V, C}, R::lm_head});
  return specs;
}

bool tensor_role_is_vector(TensorRole role) {
  using R = TensorRole;
  switch (role) {
    case R::final_norm: case R::input_norm: case R::q_bias: case R::k_bias: case R::v_bias:
    case R::q_norm: case R::k_norm: case R::o_bias: case R::post_norm:
      return true;
    default:
      return false;
  }
}

Result<CheckpointWeights> CheckpointWeights::open(const std::string& dir) {
  CheckpointWeights weights;
  const std::string index_path = dir + "/model.safetensors.index.json";
  const std::string single_path = dir + "/model.safetensors";
  std::map<std::string, std::string> weight_map;  // tensor → shard file name
  std::vector<std::string> shard_names;
  if (file_exists(index_path)) {
    GL_ASSIGN_OR_RETURN(Json index, json_read_file(index_path));
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      return make_error(index_path, ": missing field 'weight_map'");
    for (const auto& [name, file] : index["weight_map"].items()) {
      if (!file.is_string())
        return make_error(index_path, ": weight_map entry '", name, "' is not a file name");
      // Shards are files of the checkpoint directory, never a path elsewhere.
      const std::string shard = file.get<std::string>();
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
        return make_error(index_path, ": weight_map entry '", name, "' names '", shard,
                          "', not a file name of the checkpoint directory");
      weight_map[name] = shard;
      if (std::find(shard_names.begin(), shard_names.end(), weight_map[name]) == shard_names.end())
        shard_names.push_back(weight_map[name]);
    }
    if (weight_map.empty()) return make_error(index_path, ": weight_map lists no tensors");
  } else if (file_exists(single_path)) {
    shard_names.push_back("model.safetensors");
  } else {
    return make_error(dir, ": no model.safetensors or model.safetensors.index.json");
  }
  std::map<std::string, const SafetensorsFile*> by_name;
  for (const std::string& shard : shard_names) {
    const std::string path = dir + "/" + shard;
    if (!file_exists(path))
      return make_error(index_path, ": shard '", shard, "' listed in weight_map does not exist");
    GL_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::open(path));
    weights.files_.push_back(std::move(file));
    by_name[shard] = weights.files_.back().get();
  }
  if (weight_map.empty()) {
    for (const auto& t : weights.files_[0]->tensors()) weights.where_[t.name] = weights.files_[0].get();
  } else {
    for (const auto& [name, shard] : weight_map) {
      const SafetensorsFile* file = by_name[shard];
      if (!file->find(name))
        return make_error(file->path(), ": tensor '", name,
                          "' listed in model.safetensors.index.json is not in this shard");
      weights.where_[name] = file;
    }
  }
  return weights;
}

Result<CheckpointTensor> CheckpointWeights::find(const std::string& name,
                                                  const std::vector<int64_t>& shape) const {
  auto it = where_.find(name);
  if (it == where_.end()) return make_error("checkpoint: missing tensor '", name, "'");
  const TensorView* view = it->second->find(name);
  if (view->shape != shape)
    return make_error(it->second->path(), ": tensor '", name, "' has shape ",
                      shape_string(view->shape), ", expected ", shape_string(shape));
  return CheckpointTensor{view, it->second};
}

Result<std::vector<float>> CheckpointWeights::read_f32(const std::string& name,
                                                       const std::vector<int64_t>& shape) const {
  GL_ASSIGN_OR_RETURN(CheckpointTensor t, find(name, shape));
  std::vector<float> out(t.view->numel());
  GL_TRY(tensor_to_f32(*t.view, out.data(), t.file->path()));
  return out;
}

std::string CheckpointWeights::storage_dtype() const {
  if (files_.empty() || files_[0]->tensors().empty()) return "?";
  return dtype_name(files_[0]->tensors()[0].dtype);
}

size_t CheckpointWeights::storage_bytes() const {
  size_t total = 0;
  for (const auto& f : files_)
    for (const auto& t : f->tensors()) total += t.nbytes;
  return total;
}

}  // namespace golinear

#include <unistd.h>

#include <filesystem>

#include "common/file.h"

namespace golinear {

Status checkpoint_copy_base(const std::string& src, const std::string& dst) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dst, ec);
  if (ec) return make_error(dst, ": cannot create directory (", ec.message(), ")");
  for (const auto& entry : fs::directory_iterator(src, ec)) {
    const std::string name = entry.path().filename().string();
    const bool wanted = name == "config.json" || name == "generation_config.json" ||
                        name == "tokenizer.json" || name == "tokenizer_config.json" ||
                        name == "special_tokens_map.json" ||
                        name == "model.safetensors.index.json" ||
                        (name.rfind("model", 0) == 0 && entry.path().extension() == ".safetensors");
    if (!wanted || !entry.is_regular_file()) continue;
    const fs::path target = fs::path(dst) / name;
    const bool weights = entry.path().extension() == ".safetensors";
    if (fs::exists(target, ec)) {
      if (fs::equivalent(entry.path(), target, ec)) continue;
      ec.clear();
      auto same_text = [&] {
        Result<std::string> a = file_read_text(target.string()), b = file_read_text(entry.path().string());
        return a.ok() && b.ok() && *a == *b;
      };
      if (weights ? fs::file_size(target, ec) == entry.file_size() : same_text()) continue;
      ec.clear();
      fs::remove(target, ec);
      ec.clear();
    }
    // Weights are hard-linked (they are large and never written in place); the small JSON files
    // are copied, so editing the output can never change the base checkpoint.
    if (weights) fs::create_hard_link(entry.path(), target, ec);
    if (!weights || ec) {
      ec.clear();
      const fs::path temporary = target.string() + ".tmp." + std::to_string(::getpid());
      fs::copy_file(entry.path(), temporary, fs::copy_options::overwrite_existing, ec);
      if (!ec) fs::rename(temporary, target, ec);
      if (ec) {
        std::error_code ignored;
        fs::remove(temporary, ignored);
        return make_error(target.string(), ": cannot copy (", ec.message(), ")");
      }
    }
  }
  if (ec) return make_error(src, ": cannot list (", ec.message(), ")");
  return ok_status();
}

}  // namespace golinear
