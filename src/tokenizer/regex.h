// A compiled PCRE2 pattern with UTF and Unicode properties (\p{L}, \p{N}, Unicode \s), used for the
// Split and ByteLevel pre-tokenizers. HF compiles these patterns with Oniguruma; PCRE2 accepts the
// same syntax for everything the Llama-3, Qwen and GPT-2 patterns use ((?i:...), (?!\S), {1,3}).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

struct pcre2_real_code_8;  // pcre2_code with PCRE2_CODE_UNIT_WIDTH 8

namespace golinear::tokenizer {

class Regex {
 public:
  // `literal`: match `pattern` as a plain string (HF Split with {"String": ...}).
  // `what` names the tokenizer.json field in errors.
  static Result<Regex> compile(const std::string& pattern, bool literal, const std::string& what);

  // Byte ranges [begin, end) of the successive non-overlapping, non-empty matches in `text`,
  // which must be valid UTF-8. Lookaheads see the whole of `text`.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

 private:
  std::shared_ptr<pcre2_real_code_8> code_;  // shared by copies, freed with pcre2_code_free
};

}  // namespace golinear::tokenizer
