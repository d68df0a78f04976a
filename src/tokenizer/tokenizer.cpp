#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <unordered_map>

#include "common/file.h"
#include "common/json.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pre_tokenizer.h"

namespace golinear {
namespace tokenizer {

struct TokenizerState {
  BpeModel model;
  std::unordered_map<int32_t, AddedToken> added_by_id;
  std::unordered_map<std::string, int32_t> added_by_content;
  AddedTokenMatcher raw_matcher;         // added tokens with normalized = false
  AddedTokenMatcher normalized_matcher;  // normalized = true, content normalized
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  std::vector<int32_t> template_prefix;  // post-processor ids before $A (e.g. BOS)
  std::vector<int32_t> template_suffix;  // ... and after $A
  int32_t vocab_size = 0;
};

namespace {

Result<std::string> component_type(const Json& node, const std::string& field,
                                   const std::string& what) {
  if (!node.is_object()) return make_error(what, ": field '", field, "' must be an object");
  return json_get<std::string>(node, "type", str_cat(what, ": ", field));
}

// TemplateProcessing's "single" template: [{"SpecialToken": {"id": "<bos>"}}, {"Sequence":
// {"id": "A"}}, ...]; the ids of each special token are in "special_tokens"[name]["ids"].
Status read_template(const Json& node, const std::string& field, const std::string& what,
                     TokenizerState* state) {
  std::string where = str_cat(what, ": ", field);
  auto single = node.find("single");
  if (single == node.end() || !single->is_array()) {
    return make_error(where, ": field 'single' must be an array");
  }
  auto special_tokens = node.find("special_tokens");
  bool seen_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const Json& item = (*single)[i];
    std::string item_where = str_cat(where, ".single[", i, "]");
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    if (!item.contains("SpecialToken")) {
      return make_error(item_where, ": expected 'SpecialToken' or 'Sequence'");
    }
    GL_ASSIGN_OR_RETURN(std::string name,
                        json_get<std::string>(item["SpecialToken"], "id", item_where));
    if (special_tokens == node.end() || !special_tokens->is_object() ||
        !special_tokens->contains(name)) {
      return make_error(where, ": special_tokens has no entry '", name, "'");
    }
    GL_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                        json_get<std::vector<int32_t>>((*special_tokens)[name], "ids",
                                                       str_cat(where, ".special_tokens.", name)));
    auto& target = seen_sequence ? state->template_suffix : state->template_prefix;
    target.insert(target.end(), ids.begin(), ids.end());
  }
  return ok_status();
}

// "post_processor": null, ByteLevel (offsets only, no ids), TemplateProcessing, or a Sequence.
Status read_post_processor(const Json& node, const std::string& field, const std::string& what,
                           TokenizerState* state) {
  if (node.is_null()) return ok_status();
  GL_ASSIGN_OR_RETURN(std::string type, component_type(node, field, what));
  if (type == "ByteLevel") return ok_status();
  if (type == "TemplateProcessing") return read_template(node, field, what, state);
  if (type == "Sequence") {
    auto children = node.find("processors");
    if (children == node.end() || !children->is_array()) {
      return make_error(what, ": field '", field, ".processors' must be an array");
    }
    for (size_t i = 0; i < children->size(); ++i) {
      GL_TRY(
          read_post_processor((*children)[i], str_cat(field, ".processors[", i, "]"), what, state));
    }
    return ok_status();
  }
  return make_error(what, ": unsupported post_processor type '", type, "' at field '", field, "'");
}

// "decoder": ByteLevel, or a Sequence holding only ByteLevel decoders.
Status check_decoder(const Json& node, const std::string& field, const std::string& what) {
  if (node.is_null()) {
    return make_error(what, ": field '", field, "' is null; a ByteLevel decoder is required");
  }
  GL_ASSIGN_OR_RETURN(std::string type, component_type(node, field, what));
  if (type == "ByteLevel") return ok_status();
  if (type == "Sequence") {
    auto children = node.find("decoders");
    if (children == node.end() || !children->is_array()) {
      return make_error(what, ": field '", field, ".decoders' must be an array");
    }
    for (size_t i = 0; i < children->size(); ++i) {
      GL_TRY(check_decoder((*children)[i], str_cat(field, ".decoders[", i, "]"), what));
    }
    return ok_status();
  }
  return make_error(what, ": unsupported decoder type '", type, "' at field '", field, "'");
}

const Json& field_or_null(const Json& root, const char* key) {
  static const Json kNull;
  auto it = root.find(key);
  return it == root.end() ? kNull : *it;
}

}  // namespace
}  // namespace tokenizer

using tokenizer::AddedToken;
using tokenizer::TokenizerState;

Result<Tokenizer> Tokenizer::load(const std::string& tokenizer_json_path) {
  GL_ASSIGN_OR_RETURN(std::string text, file_read_text(tokenizer_json_path));
  return from_json_text(text, tokenizer_json_path);
}

Result<Tokenizer> Tokenizer::from_json_text(const std::string& json_text, const std::string& what) {
  GL_ASSIGN_OR_RETURN(Json root, json_parse(json_text, what));
  if (!root.is_object()) return make_error(what, ": expected a JSON object");
  auto state = std::make_shared<TokenizerState>();

  auto model = root.find("model");
  if (model == root.end() || !model->is_object()) {
    return make_error(what, ": missing or non-object field 'model'");
  }
  GL_ASSIGN_OR_RETURN(std::string model_type,
                      json_get_or<std::string>(*model, "type", "BPE", str_cat(what, ": model")));
  if (model_type != "BPE") {
    return make_error(what, ": unsupported model type '", model_type,
                      "' at field 'model.type' (only BPE)");
  }
  GL_ASSIGN_OR_RETURN(state->model, tokenizer::BpeModel::from_json(*model, what));

  GL_ASSIGN_OR_RETURN(state->normalizer, tokenizer::Normalizer::from_json(
                                             tokenizer::field_or_null(root, "normalizer"), what));
  GL_ASSIGN_OR_RETURN(
      state->pre_tokenizer,
      tokenizer::PreTokenizer::from_json(tokenizer::field_or_null(root, "pre_tokenizer"), what));
  GL_TRY(tokenizer::read_post_processor(tokenizer::field_or_null(root, "post_processor"),
                                        "post_processor", what, state.get()));
  GL_TRY(tokenizer::check_decoder(tokenizer::field_or_null(root, "decoder"), "decoder", what));

  GL_ASSIGN_OR_RETURN(std::vector<AddedToken> added, tokenizer::added_tokens_from_json(root, what));
  std::vector<AddedToken> raw, normalized;
  int32_t max_id = state->model.max_id();
  for (AddedToken& token : added) {
    max_id = std::max(max_id, token.id);
    state->added_by_id[token.id] = token;
    state->added_by_content[token.content] = token.id;
    if (token.normalized) {
      // HF matches these in the normalized text, so it normalizes their content as well.
      token.content = state->normalizer.apply(token.content);
      normalized.push_back(std::move(token));
    } else {
      raw.push_back(std::move(token));
    }
  }
  state->raw_matcher = tokenizer::AddedTokenMatcher(std::move(raw));
  state->normalized_matcher = tokenizer::AddedTokenMatcher(std::move(normalized));
  state->vocab_size = max_id + 1;

  for (const auto* ids : {&state->template_prefix, &state->template_suffix}) {
    for (int32_t id : *ids) {
      if (id < 0 || id > max_id) return make_error(what, ": post_processor uses unknown id ", id);
    }
  }
  Tokenizer tokenizer;
  tokenizer.state_ = std::move(state);
  return tokenizer;
}

std::vector<int32_t> Tokenizer::encode(const std::string& text, bool add_special) const {
  const TokenizerState& state = *state_;
  std::vector<int32_t> ids;
  if (add_special) ids = state.template_prefix;
  // HF works on Rust strings, which are always valid UTF-8; PCRE2 and utf8proc need that too.
  std::string input = tokenizer::utf8_repair(text);
  // HF AddedVocabulary::extract_and_normalize: cut out the added tokens that match the raw text,
  // normalize what is left, cut out those that match normalized text, then pre-tokenize and run
  // the model on each remaining piece.
  for (const tokenizer::Segment& raw : state.raw_matcher.split(input)) {
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      continue;
    }
    std::string normalized = state.normalizer.apply(raw.text);
    for (const tokenizer::Segment& piece : state.normalized_matcher.split(normalized)) {
      if (piece.id >= 0) {
        ids.push_back(piece.id);
        continue;
      }
      for (const std::string& word : state.pre_tokenizer.apply(piece.text)) {
        state.model.encode_word(word, &ids);
      }
    }
  }
  if (add_special) {
    ids.insert(ids.end(), state.template_suffix.begin(), state.template_suffix.end());
  }
  return ids;
}

std::string Tokenizer::decode_bytes(const std::vector<int32_t>& ids, bool skip_special) const {
  const TokenizerState& state = *state_;
  std::string bytes;
  for (int32_t id : ids) {
    const std::string* text = nullptr;
    auto added = state.added_by_id.find(id);
    if (added != state.added_by_id.end()) {
      if (skip_special && added->second.special) continue;
      text = &added->second.content;
    } else {
      text = state.model.id_to_token(id);
      if (text == nullptr) continue;
    }
    // HF's ByteLevel decoder maps each token's characters back to bytes; a token with a character
    // outside the map (possible for added tokens) contributes its own UTF-8 bytes.
    if (auto token_bytes = tokenizer::byte_level_decode(*text)) {
      bytes += *token_bytes;
    } else {
      bytes += *text;
    }
  }
  return bytes;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  return tokenizer::utf8_repair(decode_bytes(ids, skip_special));
}

std::string Tokenizer::token_text(int32_t id) const { return decode({id}); }

int32_t Tokenizer::vocab_size() const { return state_->vocab_size; }

std::optional<int32_t> Tokenizer::bos_id() const {
  if (state_->template_prefix.empty()) return std::nullopt;
  return state_->template_prefix.front();
}

std::optional<int32_t> Tokenizer::token_id(const std::string& token) const {
  auto added = state_->added_by_content.find(token);
  if (added != state_->added_by_content.end()) return added->second;
  return state_->model.token_to_id(token);
}

bool Tokenizer::is_special(int32_t id) const {
  auto added = state_->added_by_id.find(id);
  return added != state_->added_by_id.end() && added->second.special;
}

std::string TokenStreamDecoder::push(int32_t id) {
  pending_ += tokenizer_->decode_bytes({id}, skip_special_);
  size_t complete = tokenizer::utf8_complete_prefix_length(pending_);
  std::string text = tokenizer::utf8_repair(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return text;
}

std::string TokenStreamDecoder::finish() {
  std::string text = tokenizer::utf8_repair(pending_);
  pending_.clear();
  return text;
}

}  // namespace golinear
