#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/byte_level.h"

namespace golinear::tokenizer {

Result<Regex> Regex::compile(const std::string& pattern, bool literal, const std::string& what) {
  uint32_t options = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return make_error(what, ": cannot compile regex at offset ", error_offset, " (",
                      reinterpret_cast<const char*>(message), "): ", pattern);
  }
  // JIT is only a speed-up; find_all falls back to the interpreter if it is unavailable.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  Regex regex;
  regex.code_ = std::shared_ptr<pcre2_code>(code, pcre2_code_free);
  return regex;
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match_data(
      pcre2_match_data_create_from_pattern(code_.get(), nullptr), pcre2_match_data_free);
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  while (offset < text.size()) {
    uint32_t options = PCRE2_NO_UTF_CHECK;
    int rc =
        pcre2_match(code_.get(), subject, text.size(), offset, options, match_data.get(), nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // A very long backtracking match: retry with the interpreter, which uses the heap.
      rc = pcre2_match(code_.get(), subject, text.size(), offset, options | PCRE2_NO_JIT,
                       match_data.get(), nullptr);
    }
    if (rc < 0) break;  // PCRE2_ERROR_NOMATCH, or a resource limit: the rest stays unmatched
    PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data.get());
    size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      matches.emplace_back(begin, end);
      offset = end;
    } else {
      // Empty match: Oniguruma's find_iter steps one character forward; HF drops empty pieces.
      size_t step = utf8_valid_sequence_length(text.substr(begin));
      offset = begin + (step == 0 ? 1 : step);
    }
  }
  return matches;
}

}  // namespace golinear::tokenizer
