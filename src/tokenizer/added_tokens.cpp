#include "tokenizer/added_tokens.h"

#include <utf8proc.h>

#include <algorithm>

#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"

namespace golinear::tokenizer {
namespace {

// Start of the UTF-8 character that ends just before byte `end` of `text`.
size_t utf8_previous_start(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
  return start;
}

char32_t code_point_at(std::string_view text, size_t position, size_t* length) {
  utf8proc_int32_t code_point = -1;
  utf8proc_ssize_t n =
      utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(&text[position]),
                       static_cast<utf8proc_ssize_t>(text.size() - position), &code_point);
  *length = n > 0 ? static_cast<size_t>(n) : 1;
  return code_point < 0 ? 0xFFFD : static_cast<char32_t>(code_point);
}

// Rust's char::is_whitespace (the Unicode White_Space property), used by lstrip/rstrip.
bool is_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Letters, numbers and '_', the word characters of the single_word check.
bool is_word_character(char32_t c) {
  if (c == '_') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

}  // namespace

Result<std::vector<AddedToken>> added_tokens_from_json(const Json& root, const std::string& what) {
  std::vector<AddedToken> tokens;
  auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return tokens;
  if (!it->is_array()) return make_error(what, ": field 'added_tokens' must be an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& entry = (*it)[i];
    std::string field = str_cat(what, ": added_tokens[", i, "]");
    AddedToken token;
    GL_ASSIGN_OR_RETURN(token.id, json_get<int32_t>(entry, "id", field));
    GL_ASSIGN_OR_RETURN(token.content, json_get<std::string>(entry, "content", field));
    GL_ASSIGN_OR_RETURN(token.special, json_get_or<bool>(entry, "special", false, field));
    GL_ASSIGN_OR_RETURN(token.lstrip, json_get_or<bool>(entry, "lstrip", false, field));
    GL_ASSIGN_OR_RETURN(token.rstrip, json_get_or<bool>(entry, "rstrip", false, field));
    GL_ASSIGN_OR_RETURN(token.single_word, json_get_or<bool>(entry, "single_word", false, field));
    // HF's default: special tokens are matched in the raw text, others in the normalized text.
    GL_ASSIGN_OR_RETURN(token.normalized,
                        json_get_or<bool>(entry, "normalized", !token.special, field));
    if (token.id < 0) return make_error(field, ": negative id");
    if (token.id >= kMaxTokenIds)
      return make_error(field, ": id ", token.id, " is above the largest supported token id ",
                        kMaxTokenIds - 1);
    if (token.content.empty()) return make_error(field, ": empty content");
    if (utf8_repair(token.content) != token.content) return make_error(field, ": invalid UTF-8");
    tokens.push_back(std::move(token));
  }
  return tokens;
}

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  std::stable_sort(tokens_.begin(), tokens_.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
  for (size_t i = 0; i < tokens_.size(); ++i) {
    by_first_byte_[static_cast<uint8_t>(tokens_[i].content[0])].push_back(static_cast<int32_t>(i));
  }
}

const AddedToken* AddedTokenMatcher::longest_match_at(std::string_view text,
                                                      size_t position) const {
  for (int32_t index : by_first_byte_[static_cast<uint8_t>(text[position])]) {
    const AddedToken& candidate = tokens_[index];  // longest first
    if (text.compare(position, candidate.content.size(), candidate.content) == 0) {
      return &candidate;
    }
  }
  return nullptr;
}

std::vector<Segment> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<Segment> segments;
  size_t segment_start = 0;  // end of the previous added token
  size_t search = 0;         // where the automaton resumes: the end of the previous match
  while (search < text.size()) {
    // Leftmost-longest: the first position with a match, the longest token there.
    const AddedToken* token = nullptr;
    size_t start = search;
    for (; start < text.size(); ++start) {
      token = longest_match_at(text, start);
      if (token != nullptr) break;
    }
    if (token == nullptr) break;
    size_t stop = start + token->content.size();
    search = stop;
    size_t length = 0;
    if (token->single_word) {
      bool word_before = start > 0 && is_word_character(code_point_at(
                                          text, utf8_previous_start(text, start), &length));
      bool word_after = stop < text.size() && is_word_character(code_point_at(text, stop, &length));
      if (word_before || word_after) continue;  // HF skips the match and searches after it
    }
    if (token->lstrip) {
      while (start > segment_start) {
        size_t previous = utf8_previous_start(text, start);
        if (!is_whitespace(code_point_at(text, previous, &length))) break;
        start = previous;
      }
    }
    if (token->rstrip) {
      while (stop < text.size() && is_whitespace(code_point_at(text, stop, &length))) {
        stop += length;
      }
      search = stop;
    }
    if (start > segment_start) {
      segments.push_back(Segment{std::string(text.substr(segment_start, start - segment_start))});
    }
    segments.push_back(Segment{std::string(text.substr(start, stop - start)), token->id});
    segment_start = stop;
  }
  if (segment_start < text.size()) {
    segments.push_back(Segment{std::string(text.substr(segment_start))});
  }
  return segments;
}

}  // namespace golinear::tokenizer
