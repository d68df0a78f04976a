// The BPE model of HF tokenizers: vocab + ranked merges, applied to one pre-token ("word") at a
// time. Reproduces tokenizers/src/models/bpe (Word::merge_all) for byte-level vocabularies.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/json.h"
#include "common/result.h"

namespace golinear::tokenizer {

// Token ids are below this (2^24; real vocabularies have ≤ 262,144): the id → token table is
// dense, so one huge id in a tokenizer.json would otherwise allocate gigabytes.
inline constexpr int64_t kMaxTokenIds = int64_t{1} << 24;

class BpeModel {
 public:
  // Reads tokenizer.json's "model" object; `what` is the file name used in errors.
  static Result<BpeModel> from_json(const Json& model, const std::string& what);

  // Appends the ids of `word` (already byte-level mapped) to `ids`. Thread-safe.
  void encode_word(std::string_view word, std::vector<int32_t>* ids) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(int32_t id) const;  // nullptr when the id is not in the vocab
  int32_t max_id() const { return static_cast<int32_t>(id_to_token_.size()) - 1; }

 private:
  struct Merge {
    int32_t rank;    // position in the merges list: lower merges first
    int32_t new_id;  // id of the concatenated token
  };
  struct WordCache;

  std::vector<int32_t> merge_word(std::string_view word) const;
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;  // "" for ids absent from the vocab
  std::vector<bool> id_present_;
  std::unordered_map<uint64_t, Merge> merges_;  // key: pair_key(left id, right id)
  bool ignore_merges_ = false;
  std::shared_ptr<WordCache> cache_;  // word -> ids, shared by copies of the model
};

}  // namespace golinear::tokenizer
