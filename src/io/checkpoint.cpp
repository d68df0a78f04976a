#include "io/checkpoint.h"

#include <algorithm>

#include "common/json.h"
#include "common/sha256.h"

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

namespace {

// Where the tensors of a checkpoint directory are: its weights files (in order of first mention)
// and, for a sharded checkpoint, the shard of every tensor (empty for model.safetensors).
struct WeightsLayout {
  std::vector<std::string> files;
  std::map<std::string, std::string> weight_map;  // tensor → shard file name
};

Result<WeightsLayout> checkpoint_weights_layout(const std::string& dir) {
  WeightsLayout layout;
  const std::string index_path = dir + "/model.safetensors.index.json";
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
      layout.weight_map[name] = shard;
      if (std::find(layout.files.begin(), layout.files.end(), shard) == layout.files.end())
        layout.files.push_back(shard);
    }
    if (layout.weight_map.empty()) return make_error(index_path, ": weight_map lists no tensors");
    for (const std::string& shard : layout.files)
      if (!file_exists(dir + "/" + shard))
        return make_error(index_path, ": shard '", shard, "' listed in weight_map does not exist");
  } else if (file_exists(dir + "/model.safetensors")) {
    layout.files.push_back("model.safetensors");
  } else {
    return make_error(dir, ": no model.safetensors or model.safetensors.index.json");
  }
  return layout;
}

}  // namespace

Result<std::vector<std::string>> checkpoint_weight_files(const std::string& dir) {
  GL_ASSIGN_OR_RETURN(WeightsLayout layout, checkpoint_weights_layout(dir));
  return layout.files;
}

Result<CheckpointWeights> CheckpointWeights::open(const std::string& dir) {
  CheckpointWeights weights;
  GL_ASSIGN_OR_RETURN(WeightsLayout layout, checkpoint_weights_layout(dir));
  std::map<std::string, const SafetensorsFile*> by_name;
  for (const std::string& shard : layout.files) {
    GL_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file,
                        SafetensorsFile::open(dir + "/" + shard));
    weights.files_.push_back(std::move(file));
    by_name[shard] = weights.files_.back().get();
  }
  if (layout.weight_map.empty()) {
    for (const auto& t : weights.files_[0]->tensors()) weights.where_[t.name] = weights.files_[0].get();
  } else {
    for (const auto& [name, shard] : layout.weight_map) {
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

namespace {

constexpr const char* kFingerprintMethod = "golinear.checkpoint-fingerprint.1";
constexpr size_t kFingerprintSamples = 16;
constexpr size_t kFingerprintSampleBytes = 4096;

// {"bytes", "sha256"} of config.json: all of its bytes.
Result<Json> whole_file_fingerprint(const std::string& path) {
  GL_ASSIGN_OR_RETURN(std::string bytes, file_read_text(path));
  return Json{{"bytes", bytes.size()}, {"sha256", sha256_hex(bytes)}};
}

// {"bytes", "sha256"} of a safetensors file: its header, then the evenly spaced samples of its
// data (checkpoint_fingerprint).
Result<Json> weights_file_fingerprint(const std::string& path) {
  GL_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::open(path));
  const uint8_t* bytes = file->data();
  const size_t size = file->size();
  uint64_t header_bytes = 0;
  if (size >= 8)
    for (int i = 7; i >= 0; --i) header_bytes = header_bytes << 8 | bytes[i];
  if (size < 8 || header_bytes > size - 8)
    return make_error(path, ": not a safetensors file (its header length does not fit the file)");
  const size_t data_start = 8 + header_bytes;
  const size_t data_bytes = size - data_start;
  Sha256 hash;
  hash.update(bytes, data_start);
  if (data_bytes <= kFingerprintSamples * kFingerprintSampleBytes) {
    hash.update(bytes + data_start, data_bytes);
  } else {
    const size_t last = data_bytes - kFingerprintSampleBytes;  // offset of the last sample
    for (size_t i = 0; i < kFingerprintSamples; ++i)
      hash.update(bytes + data_start + last * i / (kFingerprintSamples - 1),
                  kFingerprintSampleBytes);
  }
  return Json{{"bytes", size}, {"sha256", hash.finish_hex()}};
}

}  // namespace

Result<Json> checkpoint_fingerprint(const std::string& dir) {
  Json files = Json::object();
  GL_ASSIGN_OR_RETURN(files["config.json"], whole_file_fingerprint(dir + "/config.json"));
  GL_ASSIGN_OR_RETURN(std::vector<std::string> weights, checkpoint_weight_files(dir));
  std::sort(weights.begin(), weights.end());
  std::string lines;
  auto add_line = [&](const std::string& name) {
    lines += str_cat(name, " ", files[name]["bytes"].get<size_t>(), " ",
                     files[name]["sha256"].get<std::string>(), "\n");
  };
  add_line("config.json");
  for (const std::string& name : weights) {
    GL_ASSIGN_OR_RETURN(files[name], weights_file_fingerprint(dir + "/" + name));
    add_line(name);
  }
  return Json{{"method", kFingerprintMethod}, {"sha256", sha256_hex(lines)}, {"files", files}};
}

std::string checkpoint_fingerprint_difference(const Json& recorded, const Json& actual) {
  if (!recorded.is_object() || !recorded.contains("method") || !recorded.contains("sha256") ||
      !recorded.contains("files") || !recorded["files"].is_object())
    return "the recorded fingerprint is not one (it needs 'method', 'sha256' and 'files')";
  if (recorded["method"] != actual["method"])
    return str_cat("the recorded fingerprint's method ", recorded["method"].dump(),
                   " is not this build's ", actual["method"].dump());
  if (recorded["sha256"] == actual["sha256"]) return "";
  const Json& was = recorded["files"];
  const Json& now = actual["files"];
  for (const auto& [name, entry] : was.items()) {
    if (!now.contains(name)) return str_cat(name, " is missing");
    if (!entry.is_object() || entry.value("bytes", Json()) != now[name]["bytes"])
      return str_cat(name, " differs: ", now[name]["bytes"].dump(), " bytes, was ",
                     entry.is_object() ? entry.value("bytes", Json()).dump() : "?");
    if (entry.value("sha256", Json()) != now[name]["sha256"])
      return name == "config.json" ? std::string("config.json differs")
                                   : str_cat(name, " differs: safetensors header or sampled data");
  }
  for (const auto& [name, entry] : now.items())
    if (!was.contains(name)) return str_cat(name, " was not part of it");
  return "the fingerprint differs";
}

}  // namespace golinear
