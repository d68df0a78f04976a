// Chat templates: the `chat_template` of a Hugging Face tokenizer_config.json, rendered by a small
// Jinja interpreter that covers what the Llama-3 and Qwen3 templates use (checked byte for byte
// against renders by @huggingface/jinja 0.5.11, tests/data/tokenizer/chat_template_goldens.json).
//
// Source handling follows Hugging Face (transformers and @huggingface/jinja): one trailing newline
// of the template is dropped, and lstrip_blocks / trim_blocks are ON (spaces and tabs before a
// `{%` or `{#` at the start of a line are removed, and so is the newline right after `%}` / `#}`);
// `{%-`, `-%}`, `{{-`, `-}}`, `{#-`, `-#}` strip all whitespace on that side.
//
// Supported: `{{ }}`, `{% %}`, `{# #}`; statements set (`set x = e`, `set ns.attr = e`),
// for (`for x in e`, `for a, b in e`, `else`, loop.index0/index/revindex0/revindex/first/last/
// length), if/elif/else; literals (strings with escapes, ints, floats, true/false/none and their
// capitalised forms, lists, tuples, dicts), attribute/item access, slicing [a:b:c], not/and/or,
// == != < <= > >=, in / not in, + - * / // % **, ~, unary -, `a if c else b`; functions
// raise_exception(msg), namespace(k=v, ...), range(); string methods strip/lstrip/rstrip (with
// optional chars), split, startswith, endswith, replace, upper, lower, title, capitalize;
// dict methods items/keys/values/get; filters trim, length/count, tojson, string, default/d,
// first, last, join, items, upper, lower, capitalize, title, replace, list, reverse, int, float,
// abs; tests defined, undefined, none, string, number, integer, float, boolean, true, false,
// mapping, iterable, sequence, callable (always false), eq/ne, and `is not ...`.
// Not supported (an error naming the position): macros, call blocks, block set, filter blocks,
// break/continue, includes, chained comparisons (`a < b < c`).
//
// Errors are one line: "chat template line L, column C: what". A render is bounded in work (steps
// and bytes handled, both growing with the context) and in output (4 MiB): a hostile template
// fails with an error naming the bound instead of running for long (chat_template.cpp says how).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/result.h"

namespace golinear {

using OrderedJson = nlohmann::ordered_json;

namespace chat_template_detail {
struct Program;
}

class ChatTemplate {
 public:
  // Renders with `context` (a JSON object) as the global variables. A key that is absent is
  // `undefined` in the template (so `tools is defined` is false and `if tools` takes the else).
  Result<std::string> render(const Json& context) const;
  // The same with object keys in the order written; use it when the template prints dicts with
  // tojson (tools, tool-call arguments), so the text matches Hugging Face's (Json sorts keys).
  Result<std::string> render(const OrderedJson& context) const;

 private:
  Result<std::string> render_value(const Json* context, const OrderedJson* ordered) const;
  friend Result<ChatTemplate> chat_template_parse(const std::string& source);
  std::shared_ptr<const chat_template_detail::Program> program_;
};

Result<ChatTemplate> chat_template_parse(const std::string& source);

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

// The context Hugging Face's apply_chat_template passes for a plain conversation: messages (list of
// {role, content}), add_generation_prompt, bos_token, eos_token, and enable_thinking when given
// (Qwen3 reads it; leaving it unset means thinking is on). `tools` is absent.
Json chat_template_context(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                           const std::string& bos_token, const std::string& eos_token,
                           std::optional<bool> enable_thinking = std::nullopt);

// The template-related fields of a tokenizer_config.json. bos_token / eos_token may be a string,
// null (empty here) or an AddedToken object {"content": ...}.
struct ChatTemplateConfig {
  std::string chat_template;  // empty when the file has none
  std::string bos_token;
  std::string eos_token;
};

Result<ChatTemplateConfig> chat_template_config_read(const std::string& tokenizer_config_path);

}  // namespace golinear
