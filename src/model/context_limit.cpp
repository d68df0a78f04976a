#include "model/context_limit.h"

#include <algorithm>

#include "common/file.h"
#include "model/linearization.h"

namespace golinear {

namespace {

constexpr long kMaxTokens = 1L << 30;

}  // namespace

long context_bytes_per_token(const ModelConfig& c) {
  const long projections = (long)(c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  return 4L * (c.vocab_size + 4L * c.hidden_size + 2 * projections + 3L * c.intermediate_size);
}

ContextLimit context_limit(const ModelConfig& config, const std::vector<std::string>& layer_mixers,
                           size_t memory_bytes) {
  const bool any_softmax =
      layer_mixers.empty() ||
      std::find(layer_mixers.begin(), layer_mixers.end(), "softmax") != layer_mixers.end();
  if (any_softmax)
    return {config.max_position_embeddings,
            str_cat("the model's max_position_embeddings (", layer_mixers.empty() ? "softmax attention"
                                                             : "a layer kept as softmax attention",
                    ")")};
  const long by_memory = (long)(memory_bytes / (size_t)context_bytes_per_token(config));
  if (by_memory < kMaxTokens)
    return {std::max(by_memory, 2L),
            str_cat("every layer is linear: the bound is one forward's memory, ",
                    context_bytes_per_token(config), " bytes per token in ",
                    memory_bytes / (1024 * 1024), " MiB")};
  return {kMaxTokens, "every layer is linear: the bound is 2^30 tokens"};
}

Result<ContextLimit> context_limit_read(const std::string& dir, size_t memory_bytes) {
  GL_ASSIGN_OR_RETURN(ModelDirectory where, model_directory_resolve(dir));
  GL_ASSIGN_OR_RETURN(ModelConfig config, model_config_read(where.base + "/config.json"));
  std::vector<std::string> layer_mixers;
  const std::string json_path = where.linearization + "/linearization.json";
  if (!where.linearization.empty() && file_exists(json_path)) {
    GL_ASSIGN_OR_RETURN(Json json, json_read_file(json_path));
    GL_ASSIGN_OR_RETURN(LinearizationRecipe recipe,
                        linearization_recipe_parse(json, config, json_path));
    layer_mixers = std::move(recipe.layer_mixers);
  }
  return context_limit(config, layer_mixers, memory_bytes);
}

}  // namespace golinear
