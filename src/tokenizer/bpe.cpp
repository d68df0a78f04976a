#include "tokenizer/bpe.h"

#include <mutex>
#include <queue>

#include "tokenizer/byte_level.h"

namespace golinear::tokenizer {

// Memoizes merge_word: natural text repeats the same words, and merging is the costly part.
// Cleared when it grows past kMaxEntries so memory stays bounded on long inputs.
struct BpeModel::WordCache {
  static constexpr size_t kMaxEntries = 1 << 16;
  static constexpr size_t kMaxWordBytes = 256;  // longer words are rare and not worth keeping
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<int32_t>> entries;
};

namespace {

// Reads one merges entry: "left right" (tokenizers < 0.20) or ["left", "right"].
Result<std::pair<std::string, std::string>> parse_merge(const Json& entry, size_t index,
                                                        const std::string& what) {
  if (entry.is_string()) {
    const std::string& text = entry.get_ref<const std::string&>();
    size_t space = text.find(' ');
    if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
      return make_error(what, ": model.merges[", index, "] is not two tokens: \"", text, "\"");
    }
    return std::pair(text.substr(0, space), text.substr(space + 1));
  }
  if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string()) {
    return std::pair(entry[0].get<std::string>(), entry[1].get<std::string>());
  }
  return make_error(what, ": model.merges[", index, "] must be \"a b\" or [\"a\", \"b\"]");
}

}  // namespace

Result<BpeModel> BpeModel::from_json(const Json& model, const std::string& what) {
  // Options that change the algorithm and that byte-level vocabularies do not use.
  GL_ASSIGN_OR_RETURN(bool byte_fallback, json_get_or<bool>(model, "byte_fallback", false, what));
  GL_ASSIGN_OR_RETURN(double dropout, json_get_or<double>(model, "dropout", 0.0, what));
  GL_ASSIGN_OR_RETURN(std::string prefix,
                      json_get_or<std::string>(model, "continuing_subword_prefix", "", what));
  GL_ASSIGN_OR_RETURN(std::string suffix,
                      json_get_or<std::string>(model, "end_of_word_suffix", "", what));
  if (byte_fallback) return make_error(what, ": model.byte_fallback = true is not supported");
  if (dropout > 0.0) return make_error(what, ": model.dropout > 0 is not supported");
  if (!prefix.empty() || !suffix.empty()) {
    return make_error(what, ": model.continuing_subword_prefix/end_of_word_suffix not supported");
  }
  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    return make_error(what, ": model.unk_token is not supported (byte-level BPE has none)");
  }

  BpeModel bpe;
  GL_ASSIGN_OR_RETURN(bpe.ignore_merges_, json_get_or<bool>(model, "ignore_merges", false, what));
  auto vocab_it = model.find("vocab");
  if (vocab_it == model.end() || !vocab_it->is_object()) {
    return make_error(what, ": missing or non-object field 'model.vocab'");
  }
  for (const auto& [token, id_json] : vocab_it->items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0) {
      return make_error(what, ": model.vocab[\"", token, "\"] is not a valid id");
    }
    if (id_json.get<int64_t>() >= kMaxTokenIds) {
      return make_error(what, ": model.vocab[\"", token, "\"] has id ", id_json.get<int64_t>(),
                        ", above the largest supported token id ", kMaxTokenIds - 1);
    }
    int32_t id = id_json.get<int32_t>();
    bpe.vocab_[token] = id;
    if (static_cast<size_t>(id) >= bpe.id_to_token_.size()) {
      bpe.id_to_token_.resize(id + 1);
      bpe.id_present_.resize(id + 1, false);
    }
    bpe.id_to_token_[id] = token;
    bpe.id_present_[id] = true;
  }

  auto merges_it = model.find("merges");
  if (merges_it == model.end() || !merges_it->is_array()) {
    return make_error(what, ": missing or non-array field 'model.merges'");
  }
  bpe.merges_.reserve(merges_it->size());
  for (size_t i = 0; i < merges_it->size(); ++i) {
    GL_ASSIGN_OR_RETURN(auto pair, parse_merge((*merges_it)[i], i, what));
    auto left = bpe.vocab_.find(pair.first);
    auto right = bpe.vocab_.find(pair.second);
    auto merged = bpe.vocab_.find(pair.first + pair.second);
    if (left == bpe.vocab_.end() || right == bpe.vocab_.end() || merged == bpe.vocab_.end()) {
      return make_error(what, ": model.merges[", i, "] (\"", pair.first, "\", \"", pair.second,
                        "\") uses a token missing from model.vocab");
    }
    // Like HF (collect into a HashMap), a repeated pair keeps its last rank.
    bpe.merges_[pair_key(left->second, right->second)] =
        Merge{static_cast<int32_t>(i), merged->second};
  }
  bpe.cache_ = std::make_shared<WordCache>();
  return bpe;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !id_present_[id]) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  // ignore_merges (Llama-3): a word that is itself a vocabulary entry is emitted whole, even if
  // the merges would have produced a different segmentation.
  if (ignore_merges_) {
    if (auto id = token_to_id(word)) {
      ids->push_back(*id);
      return;
    }
  }
  bool cacheable = word.size() <= WordCache::kMaxWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    auto it = cache_->entries.find(std::string(word));
    if (it != cache_->entries.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> word_ids = merge_word(word);
  ids->insert(ids->end(), word_ids.begin(), word_ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    if (cache_->entries.size() >= WordCache::kMaxEntries) cache_->entries.clear();
    cache_->entries.emplace(std::string(word), std::move(word_ids));
  }
}

// HF Word::merge_all: start from one symbol per character, then repeatedly apply the pair with
// the lowest merge rank (leftmost among equal ranks) through a priority queue. Queue entries made
// stale by an earlier merge are skipped when the pair at their position no longer produces the
// same token.
std::vector<int32_t> BpeModel::merge_word(std::string_view word) const {
  struct Symbol {
    int32_t id;
    int32_t prev;  // index of the previous live symbol, -1 at the start
    int32_t next;  // index of the next live symbol, -1 at the end
    bool live;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (size_t i = 0; i < word.size();) {
    size_t length = utf8_valid_sequence_length(word.substr(i));
    if (length == 0) length = 1;
    // A character missing from the vocab is dropped, as HF does when unk_token is null.
    if (auto id = token_to_id(word.substr(i, length))) {
      int32_t index = static_cast<int32_t>(symbols.size());
      symbols.push_back(Symbol{*id, index - 1, index + 1, true});
    }
    i += length;
  }
  if (symbols.empty()) return {};
  symbols.back().next = -1;

  struct Candidate {
    int32_t rank;
    int32_t position;
    int32_t new_id;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : position > other.position;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto push_pair = [&](int32_t position) {
    int32_t next = symbols[position].next;
    if (next < 0) return;
    auto it = merges_.find(pair_key(symbols[position].id, symbols[next].id));
    if (it != merges_.end()) queue.push(Candidate{it->second.rank, position, it->second.new_id});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push_pair(i);

  while (!queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.position];
    if (!left.live || left.next < 0) continue;
    auto it = merges_.find(pair_key(left.id, symbols[left.next].id));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;
    // Merge the right symbol into the left one.
    Symbol& right = symbols[left.next];
    right.live = false;
    left.id = top.new_id;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = top.position;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(top.position);
  }

  std::vector<int32_t> ids;
  for (int32_t i = 0; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
  return ids;
}

}  // namespace golinear::tokenizer
