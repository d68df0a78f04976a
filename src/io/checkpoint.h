// A Hugging Face checkpoint directory: config.json, tokenizer.json, and the weights in
// model.safetensors or shards listed by model.safetensors.index.json.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/config.h"
#include "io/safetensors.h"

namespace golinear {

class CheckpointWeights {
 public:
  // Opens model.safetensors, or every shard named by model.safetensors.index.json.
  static Result<CheckpointWeights> open(const std::string& dir);

  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  // The tensor converted to fp32, after checking it exists with exactly `shape`.
  Result<std::vector<float>> read_f32(const std::string& name,
                                      const std::vector<int64_t>& shape) const;
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
// filesystem, the small JSON files copied.
Status checkpoint_copy_base(const std::string& src, const std::string& dst);

}  // namespace golinear
