// A Hugging Face checkpoint directory: config.json, tokenizer.json, and the weights in
// model.safetensors or shards listed by model.safetensors.index.json.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/json.h"
#include "io/config.h"
#include "io/safetensors.h"

namespace golinear {

// The role of one tensor of a checkpoint (DESIGN.md §2).
enum class TensorRole {
  embed, final_norm, lm_head,                       // model-wide
  input_norm, q_proj, q_bias, k_proj, k_bias, v_proj, v_bias, q_norm, k_norm,  // per layer
  o_proj, o_bias, post_norm, gate_proj, up_proj, down_proj,
};

// One tensor the architecture has: name, shape ([out, in] for linear weights) and role.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  TensorRole role = TensorRole::embed;
  int layer = -1;  // the layer of a per-layer tensor, else −1
};

// Every tensor of `config`'s architecture (the architecture as data: the loaders and the random
// checkpoint writer share it), in the order of the Hub's checkpoints: embed_tokens, layer 0..L−1
// (norms, attention, MLP), norm, lm_head (absent when tie_word_embeddings).
std::vector<TensorSpec> checkpoint_tensor_specs(const ModelConfig& config);

// True for the 1-D tensors kept in fp32 by the GPU model (norm weights and biases).
bool tensor_role_is_vector(TensorRole role);

class SafetensorsFile;

// A tensor found in a checkpoint, with the file that holds it.
struct CheckpointTensor {
  const TensorView* view = nullptr;
  const SafetensorsFile* file = nullptr;
};

class CheckpointWeights {
 public:
  // Opens model.safetensors, or every shard named by model.safetensors.index.json.
  static Result<CheckpointWeights> open(const std::string& dir);

  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  // The tensor converted to fp32, after checking it exists with exactly `shape`.
  Result<std::vector<float>> read_f32(const std::string& name,
                                      const std::vector<int64_t>& shape) const;
  // The tensor `name` after checking it exists with exactly `shape` (its data stays mapped).
  Result<CheckpointTensor> find(const std::string& name, const std::vector<int64_t>& shape) const;
  // dtype of the first tensor (what the checkpoint stores), for `info`.
  std::string storage_dtype() const;
  size_t storage_bytes() const;

 private:
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;
};

}  // namespace golinear

namespace golinear {

// Copies the files of a base checkpoint (config, tokenizer, generation config, weights and their
// shard index) from `src` into `dst`: the safetensors hard-linked when both sit on one
// filesystem, the small JSON files copied. Each copy goes to a temporary name, then is renamed,
// so a file under its own name is complete; files already there (a resumed run: the same link,
// the same bytes, or a weights copy of the same size) are kept.
Status checkpoint_copy_base(const std::string& src, const std::string& dst);

// The weights files of the checkpoint in `dir`, as CheckpointWeights::open reads them: the
// shards named by model.safetensors.index.json (in order of first mention), or model.safetensors.
Result<std::vector<std::string>> checkpoint_weight_files(const std::string& dir);

// A cheap identity of the checkpoint in `dir`, which an adapter records for its base (DESIGN.md
// §4 "Output") and every load checks:
//   config.json    its size and the SHA-256 of all its bytes;
//   weights files  (checkpoint_weight_files) each one's size and the SHA-256 of its safetensors
//                  header (the 8-byte length and the JSON) followed by 16 samples of 4 KiB at
//                  evenly spaced offsets of its tensor data (all of the data when under 64 KiB);
//   "sha256"       the SHA-256 of the lines "<name> <bytes> <sha256>\n" of those files, config.json
//                  first, then the weights files by name.
// It reads a few hundred KiB whatever the model's size (hashing 16 GB of an 8B model at every
// load would take a minute), and differs for another config, another dtype, shape or sharding,
// and a fine-tune of the same architecture (its sampled weights differ); it is not a hash of
// every byte: a change confined to the bytes between samples goes unseen. tokenizer.json is not
// part of it (the new parameters depend on the weights, not on how text becomes ids).
// As JSON: {"method": "golinear.checkpoint-fingerprint.1", "sha256": ..., "files": {name:
// {"bytes", "sha256"}}}.
Result<Json> checkpoint_fingerprint(const std::string& dir);

// "" when `actual` (checkpoint_fingerprint of a checkpoint now) identifies the same checkpoint
// as `recorded` (one taken before); otherwise what differs, in a few words ("config.json
// differs", "model.safetensors differs: 1024 bytes, was 2048", "model-00002-of-00002.safetensors
// is missing", ...). `recorded` comes from a file and is checked here.
std::string checkpoint_fingerprint_difference(const Json& recorded, const Json& actual);

}  // namespace golinear
