#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "io/checkpoint.h"
#include "model/linearization.h"

namespace golinear::cli {

int cmd_info(const Argv& argv) {
  auto args = Args::parse("info", argv, {}, 1, 1);
  if (!args.ok()) return fail(args.error());
  const std::string dir = args->positional()[0];
  auto where = model_directory_resolve(dir);  // an adapter: the base's config and weights
  if (!where.ok()) return fail(where.error());
  auto config = model_config_read(where->base + "/config.json");
  if (!config.ok()) return fail(config.error());
  auto weights = CheckpointWeights::open(where->base);
  if (!weights.ok()) return fail(weights.error());
  const ModelConfig& c = *config;
  const long params = model_config_parameter_count(c);
  Json info = {
      {"architecture", c.architecture},
      {"family", model_family_name(c.family)},
      {"layers", c.num_layers},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"heads", c.num_heads},
      {"kv_heads", c.num_kv_heads},
      {"head_dim", c.head_dim},
      {"vocab_size", c.vocab_size},
      {"max_position_embeddings", c.max_position_embeddings},
      {"rope", {{"type", c.rope.type}, {"theta", c.rope.theta}, {"factor", c.rope.factor}}},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"parameters", params},
      {"dtype", weights->storage_dtype()},
      {"checkpoint_bytes", weights->storage_bytes()},
      {"fp32_weight_bytes", params * 4},
      {"kv_cache_bytes_per_token_fp32",
       2L * c.num_layers * c.num_kv_heads * c.head_dim * 4},
  };
  // A linearized checkpoint: its recipe, the mixer of every layer and its new parameters; an
  // adapter: also its base as recorded, where that resolved to, and the base's fingerprint.
  if (where->is_adapter())
    info["adapter"] = {{"base", where->base_recorded}, {"base_resolved", where->base},
                       {"base_sha256", where->base_sha256}};
  const std::string recipe_path = where->linearization + "/linearization.json";
  if (!where->linearization.empty()) {
    auto json = json_read_file(recipe_path);
    if (!json.ok()) return fail(json.error());
    auto recipe = linearization_recipe_parse(*json, c, recipe_path);
    if (!recipe.ok()) return fail(recipe.error());
    info["linearization"] = {{"recipe", (*json)["recipe"]}, {"layers", recipe->layer_mixers},
                             {"training", recipe->training}};
  }
  std::printf("%s\n", info.dump(2).c_str());
  return 0;
}

}  // namespace golinear::cli
