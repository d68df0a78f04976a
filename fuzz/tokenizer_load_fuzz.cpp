// tokenizer.json on arbitrary bytes: loaded or refused; a tokenizer that loads encodes and
// decodes a fixed text without crashing.
#include <string>

#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tokenizer = golinear::Tokenizer::from_json_text(
      std::string(reinterpret_cast<const char*>(data), size), "tokenizer.json");
  if (!tokenizer.ok()) return 0;
  const std::vector<int32_t> ids = tokenizer->encode("Hello world, it's 2024! \xc3\xa9t\xc3\xa9 \n\n  x", true);
  (void)tokenizer->decode(ids, false);
  (void)tokenizer->decode({0, 1, 2, -1, 1 << 30}, true);
  return 0;
}
