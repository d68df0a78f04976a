// The Llama-3-style byte-level BPE of the random-llama fixture on arbitrary bytes: every id is
// inside the vocabulary, and valid UTF-8 text decodes back to itself (byte-level BPE without a
// normalizer loses nothing); invalid UTF-8 decodes to its U+FFFD repair.
#include <utf8proc.h>

#include <string>

#include "tokenizer/tokenizer.h"

namespace {

bool valid_utf8(const std::string& text) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  utf8proc_ssize_t left = (utf8proc_ssize_t)text.size();
  while (left > 0) {
    utf8proc_int32_t codepoint;
    const utf8proc_ssize_t n = utf8proc_iterate(p, left, &codepoint);
    if (n <= 0) return false;
    p += n;
    left -= n;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const golinear::Tokenizer tokenizer = [] {
    auto t = golinear::Tokenizer::load(std::string(GOLINEAR_TEST_DATA) + "/fixtures/random-llama/tokenizer.json");
    if (!t.ok()) std::abort();
    return *t;
  }();
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<int32_t> ids = tokenizer.encode(text, /*add_special=*/false);
  for (int32_t id : ids)
    if (id < 0 || id >= tokenizer.vocab_size()) std::abort();
  const std::string decoded = tokenizer.decode(ids, /*skip_special=*/false);
  if (valid_utf8(text) && decoded != text) std::abort();
  if (!valid_utf8(decoded)) std::abort();
  return 0;
}
