// Byte-level BPE tokenizer read from a Hugging Face tokenizer.json, reproducing the ids and text
// of the `tokenizers` library (checked against tokenizers 0.23 goldens for Llama-3 and Qwen3).
//
// encode(): added tokens are cut out of the raw text first, the rest is normalized (NFC for Qwen),
// split by the pre-tokenizer regex, byte-level mapped and merged by the BPE model; with
// add_special the post-processor template adds its special tokens (Llama's BOS).
// decode(): token texts are mapped back to bytes (GPT-2 byte<->unicode map) and invalid UTF-8 is
// replaced by U+FFFD, as HF does.
//
// Streaming: a token may end in the middle of a UTF-8 character. Either use TokenStreamDecoder
// below, or decode_bytes() the tokens generated so far and print only the complete prefix.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace golinear {

namespace tokenizer {
struct TokenizerState;
}

class Tokenizer {
 public:
  // Errors name the file and the field (malformed JSON, missing model.vocab, a model type other
  // than BPE, a pre-tokenizer/normalizer/decoder type that is not supported, ...).
  static Result<Tokenizer> load(const std::string& tokenizer_json_path);
  // Same from the JSON text; `what` names the source in errors.
  static Result<Tokenizer> from_json_text(const std::string& json_text, const std::string& what);

  // add_special: apply the post-processor template (e.g. prepend BOS) as HF
  // encode(add_special_tokens=True). Invalid UTF-8 in `text` is first replaced by U+FFFD.
  std::vector<int32_t> encode(const std::string& text, bool add_special = true) const;
  // Unknown ids are skipped, as HF does. skip_special drops added tokens marked special.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;
  // The bytes decode() would produce before the UTF-8 repair (may end mid-character).
  std::string decode_bytes(const std::vector<int32_t>& ids, bool skip_special = false) const;
  // Decoded text of one token; may contain U+FFFD for a partial character (see streaming above).
  std::string token_text(int32_t id) const;

  int32_t vocab_size() const;  // 1 + the largest id of the model vocab and the added tokens
  std::optional<int32_t> bos_id() const;  // the special token before $A in the template, if any
  std::optional<int32_t> token_id(const std::string& token) const;  // added tokens, then vocab
  bool is_special(int32_t id) const;

 private:
  Tokenizer() = default;
  std::shared_ptr<const tokenizer::TokenizerState> state_;  // immutable, shared by copies
};

// Incremental decoding for generation: push() returns the text completed by each new token and
// holds back the bytes of a character that is not finished yet.
class TokenStreamDecoder {
 public:
  explicit TokenStreamDecoder(const Tokenizer& tokenizer, bool skip_special = false)
      : tokenizer_(&tokenizer), skip_special_(skip_special) {}
  std::string push(int32_t id);
  std::string finish();  // whatever is pending, with U+FFFD for an unfinished character

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace golinear
