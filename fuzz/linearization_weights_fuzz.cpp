// linearization.safetensors on arbitrary bytes beside a fixed linearization.json (random-llama,
// two gdn layers, no LoRA: the seed is what `golinear linearize` wrote for it): the mixers are
// installed or the file is refused with an error; an installed model then runs a forward of 8
// tokens, so a parameter accepted with the wrong size is read out of bounds (ASan) there.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "model/linearization.h"
#include "model/transformer.h"

namespace {

const char* kRecipe = R"({
  "base": {"architecture": "LlamaForCausalLM", "head_dim": 16, "hidden_size": 64,
           "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
           "vocab_size": 8192},
  "format": "golinear.linearization",
  "layers": ["gdn", "gdn"],
  "recipe": {"conv": true, "layer_windows": [88, 24], "linear_rope": false, "mix": "split",
             "mixer": "gdn", "sinks": 8, "window": 56},
  "version": 1
})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static golinear::Model* model = [] {
    auto m = golinear::model_load(std::string(GOLINEAR_TEST_DATA) + "/fixtures/random-llama");
    if (!m.ok()) std::abort();
    return m->release();
  }();
  static const std::string dir = [] {
    const std::string json = golinear::fuzz::fuzz_path("linearization.json");
    golinear::fuzz::fuzz_write("linearization.json", reinterpret_cast<const uint8_t*>(kRecipe),
                               std::string(kRecipe).size());
    return json.substr(0, json.rfind('/'));
  }();
  golinear::fuzz::fuzz_write("linearization.safetensors", data, size);
  if (!golinear::linearization_apply(*model, dir).ok()) return 0;
  const std::vector<int32_t> ids = {1, 17, 300, 4095, 8191, 2, 5, 9};
  std::vector<float> logits((size_t)ids.size() * model->config.vocab_size);
  golinear::model_forward(*model, ids.data(), (int)ids.size(), logits.data());
  return 0;
}
