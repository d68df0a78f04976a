#include "tokenizer/pre_tokenizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "tokenizer/byte_level.h"

namespace golinear::tokenizer {
namespace {

// The pattern of HF's ByteLevel pre-tokenizer with use_regex = true (GPT-2's).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

Result<std::string> node_type(const Json& node, const std::string& field, const std::string& what) {
  if (!node.is_object()) return make_error(what, ": field '", field, "' must be an object");
  return json_get<std::string>(node, "type", str_cat(what, ": ", field));
}

// Appends to `out` the pieces of `text` cut by `regex` with HF's "Isolated" behaviour: every match
// is a piece of its own, and so is every non-empty stretch between matches.
void split_isolated(const Regex& regex, std::string_view text, std::vector<std::string>* out) {
  size_t previous = 0;
  for (auto [begin, end] : regex.find_all(text)) {
    if (begin > previous) out->emplace_back(text.substr(previous, begin - previous));
    out->emplace_back(text.substr(begin, end - begin));
    previous = end;
  }
  if (previous < text.size()) out->emplace_back(text.substr(previous));
}

}  // namespace

Result<Normalizer> Normalizer::from_json(const Json& normalizer, const std::string& what) {
  Normalizer result;
  if (normalizer.is_null()) return result;
  // Flatten nested Sequences into a list of normalization forms.
  std::vector<std::pair<const Json*, std::string>> pending = {{&normalizer, "normalizer"}};
  while (!pending.empty()) {
    auto [node, field] = pending.front();
    pending.erase(pending.begin());
    GL_ASSIGN_OR_RETURN(std::string type, node_type(*node, field, what));
    if (type == "Sequence") {
      auto children = node->find("normalizers");
      if (children == node->end() || !children->is_array()) {
        return make_error(what, ": field '", field, ".normalizers' must be an array");
      }
      for (size_t i = 0; i < children->size(); ++i) {
        pending.insert(pending.begin() + i,
                       {&(*children)[i], str_cat(field, ".normalizers[", i, "]")});
      }
    } else if (type == "NFC") {
      result.forms_.push_back(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    } else if (type == "NFD") {
      result.forms_.push_back(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
    } else if (type == "NFKC") {
      result.forms_.push_back(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
    } else if (type == "NFKD") {
      result.forms_.push_back(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
    } else {
      return make_error(what, ": unsupported normalizer type '", type, "' at field '", field, "'");
    }
  }
  return result;
}

std::string Normalizer::apply(std::string_view text) const {
  std::string current(text);
  for (int options : forms_) {
    if (current.empty()) break;
    utf8proc_uint8_t* mapped = nullptr;
    utf8proc_ssize_t length =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(current.data()),
                     static_cast<utf8proc_ssize_t>(current.size()), &mapped,
                     static_cast<utf8proc_option_t>(options));
    std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(mapped, std::free);
    // utf8proc only fails on invalid UTF-8 or allocation failure; the text was repaired before.
    if (length >= 0) current.assign(reinterpret_cast<const char*>(mapped), length);
  }
  return current;
}

Status PreTokenizer::add_steps(const Json& node, const std::string& field, const std::string& what,
                               std::vector<Step>* steps) {
  GL_ASSIGN_OR_RETURN(std::string type, node_type(node, field, what));
  std::string where = str_cat(what, ": ", field);
  if (type == "Sequence") {
    auto children = node.find("pretokenizers");
    if (children == node.end() || !children->is_array()) {
      return make_error(where, ": field 'pretokenizers' must be an array");
    }
    for (size_t i = 0; i < children->size(); ++i) {
      GL_TRY(add_steps((*children)[i], str_cat(field, ".pretokenizers[", i, "]"), what, steps));
    }
    return ok_status();
  }
  Step step;
  if (type == "Split") {
    GL_ASSIGN_OR_RETURN(std::string behavior, json_get<std::string>(node, "behavior", where));
    GL_ASSIGN_OR_RETURN(bool invert, json_get_or<bool>(node, "invert", false, where));
    if (behavior != "Isolated" || invert) {
      return make_error(where, ": only behavior 'Isolated' with invert false is supported (got '",
                        behavior, "', invert ", invert, ")");
    }
    auto pattern = node.find("pattern");
    if (pattern == node.end() || !pattern->is_object()) {
      return make_error(where, ": missing field 'pattern'");
    }
    bool literal = pattern->contains("String");
    if (!literal && !pattern->contains("Regex")) {
      return make_error(where, ": field 'pattern' needs 'Regex' or 'String'");
    }
    GL_ASSIGN_OR_RETURN(
        std::string text,
        json_get<std::string>(*pattern, literal ? "String" : "Regex", where + ".pattern"));
    GL_ASSIGN_OR_RETURN(step.regex, Regex::compile(text, literal, where + ".pattern"));
  } else if (type == "ByteLevel") {
    step.byte_level = true;
    GL_ASSIGN_OR_RETURN(step.add_prefix_space,
                        json_get_or<bool>(node, "add_prefix_space", true, where));
    GL_ASSIGN_OR_RETURN(step.use_regex, json_get_or<bool>(node, "use_regex", true, where));
    if (step.use_regex) {
      GL_ASSIGN_OR_RETURN(step.regex, Regex::compile(kGpt2Pattern, false, where));
    }
  } else {
    return make_error(what, ": unsupported pre_tokenizer type '", type, "' at field '", field, "'");
  }
  steps->push_back(std::move(step));
  return ok_status();
}

Result<PreTokenizer> PreTokenizer::from_json(const Json& pre_tokenizer, const std::string& what) {
  PreTokenizer result;
  if (pre_tokenizer.is_null()) return result;
  GL_TRY(add_steps(pre_tokenizer, "pre_tokenizer", what, &result.steps_));
  return result;
}

std::vector<std::string> PreTokenizer::apply(std::string_view text) const {
  std::vector<std::string> words;
  if (!text.empty()) words.emplace_back(text);
  for (const Step& step : steps_) {
    std::vector<std::string> next;
    next.reserve(words.size());
    for (std::string& word : words) {
      if (!step.byte_level) {
        split_isolated(step.regex, word, &next);
        continue;
      }
      // HF ByteLevel: optionally prefix a space, optionally split with the GPT-2 pattern, then
      // map every byte of every piece to its printable character.
      if (step.add_prefix_space && word[0] != ' ') word.insert(word.begin(), ' ');
      size_t first = next.size();
      if (step.use_regex) {
        split_isolated(step.regex, word, &next);
      } else {
        next.push_back(std::move(word));
      }
      for (size_t i = first; i < next.size(); ++i) next[i] = byte_level_encode(next[i]);
    }
    words = std::move(next);
  }
  return words;
}

}  // namespace golinear::tokenizer
