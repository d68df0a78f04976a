// config.json of the supported Hugging Face architectures, read into one flat description.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/result.h"

namespace golinear {

enum class ModelFamily { llama, qwen2, qwen3 };

const char* model_family_name(ModelFamily family);

struct RopeConfig {
  std::string type = "default";  // default | llama3 | linear
  double theta = 10000.0;
  double factor = 1.0;                    // llama3, linear
  double low_freq_factor = 1.0;           // llama3
  double high_freq_factor = 4.0;          // llama3
  int original_max_position = 8192;       // llama3
};

struct ModelConfig {
  std::string architecture;  // e.g. "LlamaForCausalLM"
  ModelFamily family = ModelFamily::llama;
  int vocab_size = 0;                // V
  int hidden_size = 0;               // C
  int intermediate_size = 0;         // F
  int num_layers = 0;                // L
  int num_heads = 0;                 // H
  int num_kv_heads = 0;              // G
  int head_dim = 0;                  // D
  int max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;             // Qwen2 always; Llama with attention_bias
  bool o_bias = false;               // Llama with attention_bias
  bool qk_norm = false;              // Qwen3
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;
  std::string dtype;                 // as stored ("bfloat16", ...)
  RopeConfig rope;
  Json raw;                          // the file as read, written back unchanged by linearize
};

// Parses config.json; `what` names the file in errors.
Result<ModelConfig> model_config_parse(const Json& json, const std::string& what);
Result<ModelConfig> model_config_read(const std::string& path);

// RoPE inverse frequencies (D/2) with the configured scaling applied.
std::vector<float> rope_inverse_frequencies(const RopeConfig& rope, int head_dim);

// Parameter count of the base model (embedding counted once when tied).
long model_config_parameter_count(const ModelConfig& config);

}  // namespace golinear
