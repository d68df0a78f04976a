#include "io/config.h"

#include <algorithm>
#include <cmath>

namespace golinear {

const char* model_family_name(ModelFamily family) {
  switch (family) {
    case ModelFamily::llama: return "llama";
    case ModelFamily::qwen2: return "qwen2";
    case ModelFamily::qwen3: return "qwen3";
  }
  return "?";
}

namespace {

// Rope settings come either as `rope_theta` + `rope_scaling` (checkpoints on the Hub) or as one
// `rope_parameters` object (transformers ≥ 5). Both spellings of the type key occur.
Result<RopeConfig> rope_config_parse(const Json& json, const std::string& what) {
  RopeConfig rope;
  const Json* params = nullptr;
  if (json.contains("rope_parameters") && !json["rope_parameters"].is_null()) {
    params = &json["rope_parameters"];
  } else if (json.contains("rope_scaling") && !json["rope_scaling"].is_null()) {
    params = &json["rope_scaling"];
  }
  GL_ASSIGN_OR_RETURN(rope.theta, json_get_or<double>(json, "rope_theta", 10000.0, what));
  if (!params) return rope;
  const std::string field = json.contains("rope_parameters") ? "rope_parameters" : "rope_scaling";
  const std::string pwhat = what + " " + field;
  if (!params->is_object()) return make_error(what, ": field '", field, "' is not an object");
  if (params->contains("rope_theta")) {
    GL_ASSIGN_OR_RETURN(rope.theta, json_get<double>(*params, "rope_theta", pwhat));
  }
  std::string type = "default";
  if (params->contains("rope_type")) {
    GL_ASSIGN_OR_RETURN(type, json_get<std::string>(*params, "rope_type", pwhat));
  } else if (params->contains("type")) {
    GL_ASSIGN_OR_RETURN(type, json_get<std::string>(*params, "type", pwhat));
  }
  rope.type = type;
  if (type == "default") return rope;
  if (type == "linear") {
    GL_ASSIGN_OR_RETURN(rope.factor, json_get<double>(*params, "factor", pwhat));
    if (!(rope.factor > 0)) return make_error(pwhat, ": factor must be positive");
    return rope;
  }
  if (type == "llama3") {
    GL_ASSIGN_OR_RETURN(rope.factor, json_get<double>(*params, "factor", pwhat));
    GL_ASSIGN_OR_RETURN(rope.low_freq_factor, json_get<double>(*params, "low_freq_factor", pwhat));
    GL_ASSIGN_OR_RETURN(rope.high_freq_factor,
                        json_get<double>(*params, "high_freq_factor", pwhat));
    GL_ASSIGN_OR_RETURN(rope.original_max_position,
                        json_get<int>(*params, "original_max_position_embeddings", pwhat));
    if (!(rope.factor > 0) || !(rope.high_freq_factor > rope.low_freq_factor) ||
        rope.original_max_position <= 0)
      return make_error(pwhat, ": inconsistent llama3 scaling parameters");
    return rope;
  }
  return make_error(pwhat, ": unsupported rope_type '", type, "' (supported: default, llama3, linear)");
}

}  // namespace

Result<ModelConfig> model_config_parse(const Json& json, const std::string& what) {
  if (!json.is_object()) return make_error(what, ": expected a JSON object");
  ModelConfig c;
  c.raw = json;
  GL_ASSIGN_OR_RETURN(auto architectures,
                      json_get<std::vector<std::string>>(json, "architectures", what));
  if (architectures.size() != 1)
    return make_error(what, ": field 'architectures' must name exactly one architecture");
  c.architecture = architectures[0];
  if (c.architecture == "LlamaForCausalLM") {
    c.family = ModelFamily::llama;
  } else if (c.architecture == "Qwen2ForCausalLM") {
    c.family = ModelFamily::qwen2;
  } else if (c.architecture == "Qwen3ForCausalLM") {
    c.family = ModelFamily::qwen3;
  } else {
    return make_error(what, ": unsupported architecture '", c.architecture,
                      "' (supported: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)");
  }
  GL_ASSIGN_OR_RETURN(c.vocab_size, json_get<int>(json, "vocab_size", what));
  GL_ASSIGN_OR_RETURN(c.hidden_size, json_get<int>(json, "hidden_size", what));
  GL_ASSIGN_OR_RETURN(c.intermediate_size, json_get<int>(json, "intermediate_size", what));
  GL_ASSIGN_OR_RETURN(c.num_layers, json_get<int>(json, "num_hidden_layers", what));
  GL_ASSIGN_OR_RETURN(c.num_heads, json_get<int>(json, "num_attention_heads", what));
  GL_ASSIGN_OR_RETURN(c.num_kv_heads,
                      json_get_or<int>(json, "num_key_value_heads", c.num_heads, what));
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.intermediate_size <= 0 || c.num_layers <= 0 ||
      c.num_heads <= 0 || c.num_kv_heads <= 0)
    return make_error(what, ": sizes (vocab_size, hidden_size, intermediate_size, "
                            "num_hidden_layers, num_attention_heads, num_key_value_heads) must be positive");
  if (c.num_heads % c.num_kv_heads != 0)
    return make_error(what, ": num_key_value_heads (", c.num_kv_heads,
                      ") does not divide num_attention_heads (", c.num_heads, ")");
  if (c.hidden_size % c.num_heads != 0 && !json.contains("head_dim"))
    return make_error(what, ": hidden_size is not a multiple of num_attention_heads and no head_dim is given");
  GL_ASSIGN_OR_RETURN(c.head_dim,
                      json_get_or<int>(json, "head_dim", c.hidden_size / c.num_heads, what));
  if (c.head_dim <= 0 || c.head_dim % 2 != 0)
    return make_error(what, ": head_dim must be a positive even number");
  GL_ASSIGN_OR_RETURN(c.max_position_embeddings,
                      json_get_or<int>(json, "max_position_embeddings", 2048, what));
  GL_ASSIGN_OR_RETURN(c.rms_norm_eps, json_get_or<double>(json, "rms_norm_eps", 1e-6, what));
  GL_ASSIGN_OR_RETURN(c.tie_word_embeddings,
                      json_get_or<bool>(json, "tie_word_embeddings", false, what));
  GL_ASSIGN_OR_RETURN(bool attention_bias, json_get_or<bool>(json, "attention_bias", false, what));
  std::string act;
  GL_ASSIGN_OR_RETURN(act, json_get_or<std::string>(json, "hidden_act", "silu", what));
  if (act != "silu") return make_error(what, ": unsupported hidden_act '", act, "' (only silu)");
  switch (c.family) {
    case ModelFamily::llama:
      c.qkv_bias = c.o_bias = attention_bias;
      break;
    case ModelFamily::qwen2:  // Qwen2 attention always has q/k/v biases and no o bias
      c.qkv_bias = true;
      break;
    case ModelFamily::qwen3:
      c.qkv_bias = c.o_bias = attention_bias;
      c.qk_norm = true;
      break;
  }
  if (json.contains("mlp_bias") && json["mlp_bias"].is_boolean() && json["mlp_bias"].get<bool>())
    return make_error(what, ": mlp_bias = true is not supported");
  GL_ASSIGN_OR_RETURN(c.bos_token_id, json_get_or<int>(json, "bos_token_id", -1, what));
  if (json.contains("eos_token_id") && !json["eos_token_id"].is_null()) {
    const Json& eos = json["eos_token_id"];
    if (eos.is_number_integer()) {
      c.eos_token_ids = {eos.get<int>()};
    } else if (eos.is_array() && std::all_of(eos.begin(), eos.end(), [](const Json& e) { return e.is_number_integer(); })) {
      c.eos_token_ids = eos.get<std::vector<int>>();
    } else {
      return make_error(what, ": field 'eos_token_id' must be an integer or a list of integers");
    }
  }
  if (c.bos_token_id >= c.vocab_size || c.bos_token_id < -1)
    return make_error(what, ": bos_token_id ", c.bos_token_id, " is outside the vocabulary [0, ", c.vocab_size, ")");
  for (int id : c.eos_token_ids)
    if (id < 0 || id >= c.vocab_size)
      return make_error(what, ": eos_token_id ", id, " is outside the vocabulary [0, ", c.vocab_size, ")");
  GL_ASSIGN_OR_RETURN(c.dtype, json_get_or<std::string>(json, "torch_dtype", "", what));
  if (c.dtype.empty()) {
    GL_ASSIGN_OR_RETURN(c.dtype, json_get_or<std::string>(json, "dtype", "float32", what));
  }
  GL_ASSIGN_OR_RETURN(c.rope, rope_config_parse(json, what));
  return c;
}

Result<ModelConfig> model_config_read(const std::string& path) {
  GL_ASSIGN_OR_RETURN(Json json, json_read_file(path));
  return model_config_parse(json, path);
}

std::vector<float> rope_inverse_frequencies(const RopeConfig& rope, int head_dim) {
  const int half = head_dim / 2;
  std::vector<float> inv(half);
  for (int i = 0; i < half; ++i) {
    // transformers: 1 / theta^(arange(0, D, 2) / D), computed in fp32 after an int64 arange.
    float exponent = (float)(2 * i) / (float)head_dim;
    inv[i] = 1.0f / std::pow((float)rope.theta, exponent);
  }
  if (rope.type == "linear") {
    for (float& f : inv) f = (float)(f / rope.factor);
  } else if (rope.type == "llama3") {
    const double pi = 3.14159265358979323846;
    const double L = rope.original_max_position;
    const double low_wavelen = L / rope.low_freq_factor;
    const double high_wavelen = L / rope.high_freq_factor;
    for (float& f : inv) {
      const double wavelen = 2 * pi / f;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        f = (float)(f / rope.factor);
      } else {
        double s = (L / wavelen - rope.low_freq_factor) /
                   (rope.high_freq_factor - rope.low_freq_factor);
        f = (float)((1 - s) * f / rope.factor + s * f);
      }
    }
  }
  return inv;
}

long model_config_parameter_count(const ModelConfig& c) {
  const long C = c.hidden_size, F = c.intermediate_size, V = c.vocab_size;
  const long qd = (long)c.num_heads * c.head_dim, kvd = (long)c.num_kv_heads * c.head_dim;
  long per_layer = 2 * C + C * qd + 2 * C * kvd + qd * C + 3 * C * F;
  if (c.qkv_bias) per_layer += qd + 2 * kvd;
  if (c.o_bias) per_layer += C;
  if (c.qk_norm) per_layer += 2 * c.head_dim;
  return V * C * (c.tie_word_embeddings ? 1 : 2) + c.num_layers * per_layer + C;
}

}  // namespace golinear
