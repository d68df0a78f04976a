// Added tokens (tokenizer.json "added_tokens"): strings such as <|begin_of_text|> or <think> that
// are cut out of the text before normalization and pre-tokenization and map to one id each.
// Reproduces tokenizers/src/tokenizer/added_vocabulary.rs.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/result.h"

namespace golinear::tokenizer {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;      // dropped by decode(skip_special = true)
  bool lstrip = false;       // the match also swallows whitespace on its left
  bool rstrip = false;       // ... and on its right
  bool single_word = false;  // only matches when not touching a word character on either side
  bool normalized = true;    // matched in the normalized text rather than the raw text
};

Result<std::vector<AddedToken>> added_tokens_from_json(const Json& root, const std::string& what);

// A piece of the input: either an added token (id >= 0) or text still to be tokenized (id < 0).
struct Segment {
  std::string text;
  int32_t id = -1;
};

// Finds added tokens in text the way HF's aho-corasick automaton with MatchKind::LeftmostLongest
// does: the leftmost match wins, and among matches starting there the longest.
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  // Splits `text` into added-token segments and the text between them (empty pieces dropped).
  std::vector<Segment> split(std::string_view text) const;
  bool empty() const { return tokens_.empty(); }

 private:
  const AddedToken* longest_match_at(std::string_view text, size_t position) const;

  std::vector<AddedToken> tokens_;                       // sorted by decreasing content length
  std::array<std::vector<int32_t>, 256> by_first_byte_;  // indices into tokens_, longest first
};

}  // namespace golinear::tokenizer
