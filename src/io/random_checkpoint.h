// A checkpoint directory of random weights for any supported config.json, laid out as the
// Hugging Face Hub lays out a real one: config.json, the tokenizer files, bf16 safetensors
// sharded like the Hub's (model-00001-of-00004.safetensors + model.safetensors.index.json, or a
// single model.safetensors when everything fits one shard). For taking a model of a real size
// (Llama-3.1-8B, Qwen3-8B) through the commands without downloading it.
//
// Values, a function of (seed, tensor name, element index) only, so independent of sharding,
// thread count and order: matrices N(0, 0.02²), norm weights 1, biases N(0, 0.02²); stored bf16.
// Written tensor by tensor through a bounded buffer (never the whole model in memory), into
// OUT.partial, renamed to OUT once complete.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/result.h"

namespace golinear {

struct RandomCheckpointOptions {
  std::string config_path;   // config.json of the architecture
  std::string tokenizer;     // tokenizer.json, or a directory holding it (+ tokenizer_config.json)
  std::string out;           // the directory to create; must not exist
  uint64_t seed = 0;
  uint64_t max_shard_bytes = 5000000000ull;  // the Hub's default "5GB"
};

struct RandomCheckpointSummary {
  int shards = 0;
  long tensors = 0;
  long parameters = 0;
  uint64_t total_bytes = 0;  // weight bytes (the index's metadata.total_size)
  double seconds = 0;
};

// Writes the checkpoint; `on_bytes(written, total)` (optional) reports progress of the weights.
Result<RandomCheckpointSummary> random_checkpoint_write(
    const RandomCheckpointOptions& options,
    const std::function<void(uint64_t, uint64_t)>& on_bytes = {});

// "5GB" (10⁹), "500MB", "100KB", "2GiB" (2³⁰), "1MiB", "4096" (bytes) → bytes; `what` names the
// option in errors.
Result<uint64_t> byte_size_parse(const std::string& text, const std::string& what);

}  // namespace golinear
