// model.safetensors.index.json on arbitrary bytes, beside one small valid shard: opening the
// checkpoint must refuse a bad index with an error and never read outside the directory's shards.
#include <cstring>
#include <string>

#include "fuzz_util.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    const std::string d = golinear::fuzz::fuzz_path("checkpoint");
    std::filesystem::create_directories(d);
    const float values[4] = {1, 2, 3, 4};
    if (!golinear::safetensors_write(d + "/model-00001-of-00001.safetensors",
                                     {{"model.norm.weight", {4}, values}}, {})
             .ok())
      std::abort();
    return d;
  }();
  golinear::fuzz::fuzz_write("checkpoint/model.safetensors.index.json", data, size);
  auto weights = golinear::CheckpointWeights::open(dir);
  if (weights.ok() && weights->contains("model.norm.weight"))
    (void)weights->read_f32("model.norm.weight", {4});
  return 0;
}
