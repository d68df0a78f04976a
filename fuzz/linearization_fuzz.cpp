// linearization.json on arbitrary bytes against the random-llama fixture's config: a recipe is
// accepted only when it fits the model, anything else is refused with an error.
#include <string>

#include "model/linearization.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const golinear::ModelConfig config = [] {
    auto c = golinear::model_config_read(std::string(GOLINEAR_TEST_DATA) + "/fixtures/random-llama/config.json");
    if (!c.ok()) std::abort();
    return *c;
  }();
  auto json = golinear::json_parse(std::string(reinterpret_cast<const char*>(data), size),
                                   "linearization.json");
  if (!json.ok()) return 0;
  auto recipe = golinear::linearization_recipe_parse(*json, config, "linearization.json");
  if (recipe.ok() && (int)recipe->layer_mixers.size() != config.num_layers) std::abort();
  return 0;
}
