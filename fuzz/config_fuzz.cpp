// config.json on arbitrary bytes: parsed or refused; a config that parses gives RoPE
// frequencies and a parameter count without overflow or out-of-range access.
#include <string>

#include "io/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto json = golinear::json_parse(std::string(reinterpret_cast<const char*>(data), size), "config.json");
  if (!json.ok()) return 0;
  auto config = golinear::model_config_parse(*json, "config.json");
  if (!config.ok()) return 0;
  if (config->head_dim > 0 && config->head_dim <= 4096)
    (void)golinear::rope_inverse_frequencies(config->rope, config->head_dim);
  (void)golinear::model_config_parameter_count(*config);
  return 0;
}
