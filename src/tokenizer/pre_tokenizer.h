// The normalizer and pre-tokenizer stages of tokenizer.json, restricted to what byte-level BPE
// vocabularies (GPT-2, Llama-3, Qwen) use. Anything else is rejected at load time with an Error.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/result.h"
#include "tokenizer/regex.h"

namespace golinear::tokenizer {

// "normalizer": null, NFC, NFD, NFKC, NFKD, or a Sequence of those.
class Normalizer {
 public:
  static Result<Normalizer> from_json(const Json& normalizer, const std::string& what);
  std::string apply(std::string_view text) const;  // `text` must be valid UTF-8
  bool empty() const { return forms_.empty(); }

 private:
  std::vector<int> forms_;  // utf8proc option sets, applied in order
};

// "pre_tokenizer": Split (Regex or String pattern, behavior Isolated, invert false), ByteLevel,
// or a Sequence of those. Produces the words handed to the BPE model.
class PreTokenizer {
 public:
  static Result<PreTokenizer> from_json(const Json& pre_tokenizer, const std::string& what);
  std::vector<std::string> apply(std::string_view text) const;

 private:
  struct Step {
    bool byte_level = false;        // false: a Split step
    bool add_prefix_space = false;  // ByteLevel only
    bool use_regex = false;         // ByteLevel: split with the GPT-2 pattern first
    Regex regex;                    // Split pattern, or the GPT-2 pattern
  };
  static Status add_steps(const Json& node, const std::string& field, const std::string& what,
                          std::vector<Step>* steps);

  std::vector<Step> steps_;
};

}  // namespace golinear::tokenizer
