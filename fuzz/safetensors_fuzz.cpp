// The safetensors reader on arbitrary bytes: open must either refuse with an error or hand out
// tensors whose every byte lies inside the file (tensor_to_f32 reads them all).
#include <vector>

#include "fuzz_util.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = golinear::fuzz::fuzz_write("input.safetensors", data, size);
  auto file = golinear::SafetensorsFile::open(path);
  if (!file.ok()) return 0;
  for (const golinear::TensorView& t : (*file)->tensors()) {
    if (t.numel() > (1 << 22)) continue;
    std::vector<float> values((size_t)t.numel());
    (void)golinear::tensor_to_f32(t, values.data(), path);
  }
  return 0;
}
