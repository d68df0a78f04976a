// The Jinja subset of chat_template.h: preprocess (HF's trailing-newline, lstrip_blocks and
// trim_blocks rules, keeping each character's offset in the original source for errors), lex into
// one token stream (text, tag delimiters, expression tokens), parse by recursive descent into a
// tree of statements and expressions, and render by walking the tree.
//
// Inside this file errors are thrown as TemplateError{offset, message}; the two public entry points
// catch them and return one-line Errors. Nothing is thrown across the module boundary.
#include "tokenizer/chat_template.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

namespace golinear {

namespace chat_template_detail {

struct TemplateError {
  size_t offset;  // in the original source
  std::string message;
};

// Bound on the size of a string repetition or a range(), against templates that exhaust memory.
constexpr uint64_t kMaxElements = 1 << 24;
// Bounds on a render's time and output, against hostile templates (fuzz/chat_template found nested
// loops over long strings, copies of long strings per iteration, deep nesting). The work is
// counted in two budgets, charged before it is done: steps (nodes rendered, loop iterations,
// expressions evaluated, values created, visited or compared, dict entries searched) and text
// (bytes of strings copied, built, searched or printed). With the fuzzer's context a render takes
// at most about 0.15 s under ASan. Both budgets grow with the context (its values: messages,
// fields, ...; and its string bytes), so a long chat is not refused: the Llama-3 and Qwen3
// templates take under 128 steps per context value (Qwen3 with tool messages), and under 32 text
// bytes per context byte plus 1024 per value (ChatTemplate.LongChatsRenderWithinTheBounds).
constexpr uint64_t kMaxRenderSteps = 1 << 17;
constexpr uint64_t kStepsPerLoopIteration = 4;  // it builds `loop` (9 values) and a frame
constexpr uint64_t kRenderStepsPerContextValue = 512;
constexpr uint64_t kMaxRenderText = 1 << 25;
constexpr uint64_t kRenderTextPerContextByte = 64;
constexpr uint64_t kRenderTextPerContextValue = 2048;
constexpr size_t kMaxRenderBytes = 4u << 20;
// Nesting bound of {% for %} / {% if %} blocks, so a hostile template cannot overflow the stack.
constexpr size_t kMaxBlockDepth = 100;
// Saturation of the work counts below, so sums of shared (exponentially repeated) lists cannot
// overflow.
constexpr uint64_t kHuge = uint64_t(1) << 62;

uint64_t saturated_sum(uint64_t a, uint64_t b) {
  return std::min(kHuge, std::min(kHuge, a) + std::min(kHuge, b));
}
uint64_t saturated_product(uint64_t a, uint64_t small) {
  return std::min(kHuge / small, a) * small;
}

[[noreturn]] void fail(size_t offset, const std::string& message) {
  throw TemplateError{offset, message};
}

// ---------------------------------------------------------------------------------------------
// Values

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // ordered, keys unique

struct Value {
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace };
  Kind kind = Kind::Undefined;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string string;
  std::shared_ptr<List> list;  // List
  std::shared_ptr<Dict> dict;  // Dict and Namespace (shared, so `set ns.x` mutates in place)
  // Lists and dicts (immutable once built): values and string bytes in the whole tree, counting a
  // shared element each time it appears (what printing or comparing it visits).
  uint64_t tree_values = 1, tree_bytes = 0;

  static Value none() { return make(Kind::None); }
  static Value of(bool b) {
    Value v = make(Kind::Bool);
    v.boolean = b;
    return v;
  }
  static Value of(int64_t i) {
    Value v = make(Kind::Int);
    v.integer = i;
    return v;
  }
  static Value of(double d) {
    Value v = make(Kind::Float);
    v.number = d;
    return v;
  }
  static Value of(std::string s) {
    Value v = make(Kind::String);
    v.string = std::move(s);
    return v;
  }
  static Value of(List l) {
    Value v = make(Kind::List);
    for (const Value& e : l) {
      v.tree_values = saturated_sum(v.tree_values, e.values());
      v.tree_bytes = saturated_sum(v.tree_bytes, e.bytes());
    }
    v.list = std::make_shared<List>(std::move(l));
    return v;
  }
  static Value of(Dict d, Kind kind = Kind::Dict) {
    Value v = make(kind);
    if (kind == Kind::Dict)
      for (const auto& [k, e] : d) {
        v.tree_values = saturated_sum(v.tree_values, e.values());
        v.tree_bytes = saturated_sum(v.tree_bytes, saturated_sum(k.size(), e.bytes()));
      }
    v.dict = std::make_shared<Dict>(std::move(d));
    return v;
  }
  static Value make(Kind k) {
    Value v;
    v.kind = k;
    return v;
  }

  bool is(Kind k) const { return kind == k; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float; }
  bool is_mapping() const { return kind == Kind::Dict || kind == Kind::Namespace; }
  double as_double() const { return kind == Kind::Int ? (double)integer : number; }
  // What printing, comparing or copying the whole value costs (a namespace prints as one word).
  uint64_t values() const { return kind == Kind::List || kind == Kind::Dict ? tree_values : 1; }
  uint64_t bytes() const {
    if (kind == Kind::String) return string.size();
    return kind == Kind::List || kind == Kind::Dict ? tree_bytes : 0;
  }
};

const Value* dict_find(const Dict& dict, const std::string& key) {
  for (const auto& [k, v] : dict)
    if (k == key) return &v;
  return nullptr;
}

void dict_set(Dict& dict, const std::string& key, Value value) {
  for (auto& [k, v] : dict)
    if (k == key) {
      v = std::move(value);
      return;
    }
  dict.emplace_back(key, std::move(value));
}

const char* kind_name(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::Undefined:
      return "undefined";
    case Value::Kind::None:
      return "none";
    case Value::Kind::Bool:
      return "boolean";
    case Value::Kind::Int:
      return "integer";
    case Value::Kind::Float:
      return "float";
    case Value::Kind::String:
      return "string";
    case Value::Kind::List:
      return "list";
    case Value::Kind::Dict:
      return "dict";
    case Value::Kind::Namespace:
      return "namespace";
  }
  return "?";
}

// The size of the UTF-8 character at s[i] (a malformed byte counts as one character).
size_t utf8_character_size(const std::string& s, size_t i) {
  const unsigned char c = (unsigned char)s[i];
  const size_t n = c < 0x80           ? 1
                   : (c >> 5) == 0x6  ? 2
                   : (c >> 4) == 0xE  ? 3
                   : (c >> 3) == 0x1E ? 4
                                      : 1;
  return std::min(n, s.size() - i);
}

// UTF-8 characters of `s`.
std::vector<std::string> utf8_characters(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0, n = 0; i < s.size(); i += n) {
    n = utf8_character_size(s, i);
    out.push_back(s.substr(i, n));
  }
  return out;
}

// utf8_characters(s).size(), without building them.
size_t utf8_length(const std::string& s) {
  size_t count = 0;
  for (size_t i = 0; i < s.size(); i += utf8_character_size(s, i)) ++count;
  return count;
}

// The first `needle` in `haystack` at or after `from` (std::string::find's result), in time
// linear in both (Knuth-Morris-Pratt), where std::string::find may take their product.
class TextFinder {
 public:
  explicit TextFinder(const std::string& needle) : needle_(needle), next_(needle.size() + 1, 0) {
    for (size_t i = 1, k = 0; i < needle.size(); ++i) {
      while (k > 0 && needle[i] != needle[k]) k = next_[k];
      if (needle[i] == needle[k]) ++k;
      next_[i + 1] = k;
    }
  }
  size_t find(const std::string& haystack, size_t from) const {
    if (from > haystack.size()) return std::string::npos;
    if (needle_.empty()) return from;
    for (size_t i = from, k = 0; i < haystack.size(); ++i) {
      while (k > 0 && haystack[i] != needle_[k]) k = next_[k];
      if (haystack[i] == needle_[k]) ++k;
      if (k == needle_.size()) return i + 1 - k;
    }
    return std::string::npos;
  }

 private:
  const std::string& needle_;
  std::vector<size_t> next_;  // next_[k]: the longest proper border of needle's first k bytes
};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

std::string strip_chars(const std::string& s, const std::string* chars, bool left, bool right) {
  bool strip_set[256] = {};
  if (chars)
    for (char c : *chars) strip_set[(unsigned char)c] = true;
  auto strip = [&](char c) { return chars ? strip_set[(unsigned char)c] : is_space(c); };
  size_t begin = 0, end = s.size();
  if (left)
    while (begin < end && strip(s[begin])) ++begin;
  if (right)
    while (end > begin && strip(s[end - 1])) --end;
  return s.substr(begin, end - begin);
}

std::string format_double(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buffer[40];
  for (int precision = 1; precision <= 17; ++precision) {  // shortest text that reads back
    std::snprintf(buffer, sizeof buffer, "%.*g", precision, d);
    if (std::strtod(buffer, nullptr) == d) break;
  }
  std::string text = buffer;
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

std::string to_repr(const Value& v);

// What `{{ v }}` prints (Python's str()).
std::string to_string(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
      return "";
    case Value::Kind::None:
      return "None";
    case Value::Kind::Bool:
      return v.boolean ? "True" : "False";
    case Value::Kind::Int:
      return std::to_string(v.integer);
    case Value::Kind::Float:
      return format_double(v.number);
    case Value::Kind::String:
      return v.string;
    default:
      return to_repr(v);
  }
}

std::string quote_python(const std::string& s) {
  const char quote =
      s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    if (c == '\\' || c == quote) out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + quote;
}

std::string to_repr(const Value& v) {
  switch (v.kind) {
    case Value::Kind::String:
      return quote_python(v.string);
    case Value::Kind::List: {
      std::string out = "[";
      for (size_t i = 0; i < v.list->size(); ++i) out += (i ? ", " : "") + to_repr((*v.list)[i]);
      return out + "]";
    }
    case Value::Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, e] : *v.dict) {
        out += (first ? "" : ", ") + quote_python(k) + ": " + to_repr(e);
        first = false;
      }
      return out + "}";
    }
    case Value::Kind::Namespace:
      return "<Namespace>";
    default:
      return to_string(v);
  }
}

// Python's json.dumps(v, ensure_ascii=False), as transformers' tojson does.
std::string to_json(const Value& v, size_t offset) {
  switch (v.kind) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
      return "null";
    case Value::Kind::Bool:
      return v.boolean ? "true" : "false";
    case Value::Kind::Int:
      return std::to_string(v.integer);
    case Value::Kind::Float:
      return format_double(v.number);
    case Value::Kind::String:
      return Json(v.string).dump(-1, ' ', false, Json::error_handler_t::replace);
    case Value::Kind::List: {
      std::string out = "[";
      for (size_t i = 0; i < v.list->size(); ++i)
        out += (i ? ", " : "") + to_json((*v.list)[i], offset);
      return out + "]";
    }
    case Value::Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, e] : *v.dict) {
        out += (first ? "" : ", ") + Json(k).dump(-1, ' ', false, Json::error_handler_t::replace) +
               ": " + to_json(e, offset);
        first = false;
      }
      return out + "}";
    }
    case Value::Kind::Namespace:
      fail(offset, "tojson: a namespace is not JSON serializable");
  }
  return "null";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
      return false;
    case Value::Kind::Bool:
      return v.boolean;
    case Value::Kind::Int:
      return v.integer != 0;
    case Value::Kind::Float:
      return v.number != 0;
    case Value::Kind::String:
      return !v.string.empty();
    case Value::Kind::List:
      return !v.list->empty();
    case Value::Kind::Dict:
      return !v.dict->empty();
    case Value::Kind::Namespace:
      return true;
  }
  return false;
}

// Json sorts object keys; OrderedJson keeps them as written (what tojson then prints).
template <class AnyJson>
Value from_json(const AnyJson& j) {
  switch (j.type()) {
    case AnyJson::value_t::null:
      return Value::none();
    case AnyJson::value_t::boolean:
      return Value::of(j.template get<bool>());
    case AnyJson::value_t::number_integer:
      return Value::of(j.template get<int64_t>());
    case AnyJson::value_t::number_unsigned:
      return Value::of((int64_t)j.template get<uint64_t>());
    case AnyJson::value_t::number_float:
      return Value::of(j.template get<double>());
    case AnyJson::value_t::string:
      return Value::of(j.template get<std::string>());
    case AnyJson::value_t::array: {
      List list;
      for (const auto& e : j) list.push_back(from_json(e));
      return Value::of(std::move(list));
    }
    case AnyJson::value_t::object: {
      Dict dict;
      for (auto it = j.begin(); it != j.end(); ++it)
        dict.emplace_back(it.key(), from_json(it.value()));
      return Value::of(std::move(dict));
    }
    default:
      return Value();
  }
}

// The items a `for` or a filter iterates: list elements, dict keys, string characters.
List iterate(const Value& v, size_t offset) {
  switch (v.kind) {
    case Value::Kind::List:
      return *v.list;
    case Value::Kind::Dict: {
      List keys;
      for (const auto& [k, e] : *v.dict) keys.push_back(Value::of(k));
      return keys;
    }
    case Value::Kind::String: {
      List chars;
      for (auto& c : utf8_characters(v.string)) chars.push_back(Value::of(std::move(c)));
      return chars;
    }
    case Value::Kind::Undefined:
      return {};  // Jinja iterates an undefined as empty
    default:
      fail(offset, std::string("cannot iterate over a ") + kind_name(v.kind));
  }
}

// ---------------------------------------------------------------------------------------------
// Preprocessing and lexing

struct Source {
  std::string text;
  std::vector<size_t> origin;  // origin[i]: offset in the original source of text[i]
};

// HF's preprocess(): drop one trailing newline; lstrip_blocks: remove spaces and tabs at the start
// of a line before `{%`, `{#` (or `{-`); trim_blocks: remove the newline after `%}`, `#}`, `-}`.
Source preprocess(const std::string& raw) {
  std::string s = raw;
  if (!s.empty() && s.back() == '\n') s.pop_back();
  Source out;
  bool line_start = true;
  for (size_t i = 0; i < s.size(); ++i) {
    if (line_start && (s[i] == ' ' || s[i] == '\t')) {
      size_t j = i;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j + 1 < s.size() && s[j] == '{' &&
          (s[j + 1] == '%' || s[j + 1] == '#' || s[j + 1] == '-')) {
        i = j - 1;  // drop the indentation
        line_start = false;
        continue;
      }
    }
    line_start = s[i] == '\n' || s[i] == '\r';
    out.text += s[i];
    out.origin.push_back(i);
    if (s[i] == '}' && i > 0 && (s[i - 1] == '%' || s[i - 1] == '#' || s[i - 1] == '-') &&
        i + 1 < s.size() && s[i + 1] == '\n') {
      ++i;  // trim_blocks
      line_start = true;
    }
  }
  out.origin.push_back(s.size());
  return out;
}

enum class TokenKind {
  Text,
  ExprOpen,
  ExprClose,
  StmtOpen,
  StmtClose,
  Name,
  String,
  Int,
  Float,
  Op,
  End
};

struct Token {
  TokenKind kind;
  std::string text;
  size_t offset;  // original source offset
  int64_t integer = 0;
  double number = 0;
  Token(TokenKind k, std::string t, size_t o) : kind(k), text(std::move(t)), offset(o) {}
};

std::vector<Token> lex(const Source& src) {
  const std::string& s = src.text;
  auto at = [&](size_t i) { return src.origin[std::min(i, src.origin.size() - 1)]; };
  auto starts = [&](size_t i, const char* p) {
    return s.compare(i, std::char_traits<char>::length(p), p) == 0;
  };
  std::vector<Token> tokens;
  size_t i = 0;
  bool strip_next_text = false;
  auto strip_previous_text = [&] {
    if (!tokens.empty() && tokens.back().kind == TokenKind::Text) {
      tokens.back().text = strip_chars(tokens.back().text, nullptr, false, true);
      if (tokens.back().text.empty()) tokens.pop_back();
    }
  };
  while (i < s.size()) {
    // Text up to the next tag.
    size_t j = i;
    while (j < s.size() && !(s[j] == '{' && j + 1 < s.size() &&
                             (s[j + 1] == '{' || s[j + 1] == '%' || s[j + 1] == '#')))
      ++j;
    if (j > i) {
      std::string text = s.substr(i, j - i);
      if (strip_next_text) text = strip_chars(text, nullptr, true, false);
      if (!text.empty()) tokens.push_back({TokenKind::Text, text, at(i)});
    }
    strip_next_text = false;
    i = j;
    if (i >= s.size()) break;
    const size_t open = i;
    if (s[i + 1] == '#') {
      const size_t close = s.find("#}", i + 2);
      if (close == std::string::npos) fail(at(open), "unclosed comment '{#'");
      if (s[i + 2] == '-') strip_previous_text();
      strip_next_text = close > i + 2 && s[close - 1] == '-';
      i = close + 2;
      continue;
    }
    const bool is_expr = s[i + 1] == '{';
    i += 2;
    if (i < s.size() && s[i] == '-') {
      strip_previous_text();
      ++i;
    }
    tokens.push_back(
        {is_expr ? TokenKind::ExprOpen : TokenKind::StmtOpen, is_expr ? "{{" : "{%", at(open)});
    const char* closer = is_expr ? "}}" : "%}";
    int brace_depth = 0;
    bool closed = false;
    while (i < s.size()) {
      const char c = s[i];
      if (is_space(c)) {
        ++i;
        continue;
      }
      if (c == '-' && (starts(i + 1, closer)) && brace_depth == 0) {
        strip_next_text = true;
        tokens.push_back({is_expr ? TokenKind::ExprClose : TokenKind::StmtClose, closer, at(i)});
        i += 3;
        closed = true;
        break;
      }
      if (starts(i, closer) && brace_depth == 0) {
        tokens.push_back({is_expr ? TokenKind::ExprClose : TokenKind::StmtClose, closer, at(i)});
        i += 2;
        closed = true;
        break;
      }
      if (std::isalpha((unsigned char)c) || c == '_') {
        size_t k = i;
        while (k < s.size() && (std::isalnum((unsigned char)s[k]) || s[k] == '_')) ++k;
        tokens.push_back({TokenKind::Name, s.substr(i, k - i), at(i)});
        i = k;
        continue;
      }
      if (std::isdigit((unsigned char)c)) {
        size_t k = i;
        while (k < s.size() && std::isdigit((unsigned char)s[k])) ++k;
        bool is_float = false;
        if (k + 1 < s.size() && s[k] == '.' && std::isdigit((unsigned char)s[k + 1])) {
          is_float = true;
          ++k;
          while (k < s.size() && std::isdigit((unsigned char)s[k])) ++k;
        }
        Token t{is_float ? TokenKind::Float : TokenKind::Int, s.substr(i, k - i), at(i)};
        if (is_float)
          t.number = std::strtod(t.text.c_str(), nullptr);
        else {
          errno = 0;
          t.integer = std::strtoll(t.text.c_str(), nullptr, 10);
          if (errno == ERANGE) fail(at(i), "integer literal out of range: " + t.text);
        }
        tokens.push_back(t);
        i = k;
        continue;
      }
      if (c == '\'' || c == '"') {
        std::string value;
        size_t k = i + 1;
        for (;; ++k) {
          if (k >= s.size()) fail(at(i), "unterminated string literal");
          if (s[k] == c) break;
          if (s[k] != '\\') {
            value += s[k];
            continue;
          }
          if (++k >= s.size()) fail(at(i), "unterminated string literal");
          switch (s[k]) {
            case 'n':
              value += '\n';
              break;
            case 't':
              value += '\t';
              break;
            case 'r':
              value += '\r';
              break;
            case 'b':
              value += '\b';
              break;
            case 'f':
              value += '\f';
              break;
            case 'v':
              value += '\v';
              break;
            case '0':
              value += '\0';
              break;
            case '\\':
            case '\'':
            case '"':
              value += s[k];
              break;
            case 'x':
            case 'u': {
              const size_t n = s[k] == 'x' ? 2 : 4;
              const std::string hex = s.substr(k + 1, n);
              if (hex.size() != n ||
                  hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
                fail(at(k - 1), "invalid escape \\" + std::string(1, s[k]) + hex);
              const uint32_t cp = (uint32_t)std::stoul(hex, nullptr, 16);
              if (cp < 0x80)
                value += (char)cp;
              else if (cp < 0x800) {
                value += (char)(0xC0 | (cp >> 6));
                value += (char)(0x80 | (cp & 0x3F));
              } else {
                value += (char)(0xE0 | (cp >> 12));
                value += (char)(0x80 | ((cp >> 6) & 0x3F));
                value += (char)(0x80 | (cp & 0x3F));
              }
              k += n;
              break;
            }
            default:
              value += '\\';
              value += s[k];
          }
        }
        tokens.push_back({TokenKind::String, value, at(i)});
        i = k + 1;
        continue;
      }
      static const char* ops[] = {"==", "!=", "<=", ">=", "//", "**", "+", "-", "*",
                                  "/",  "%",  "~",  "<",  ">",  "|",  ".", ",", ":",
                                  "(",  ")",  "[",  "]",  "{",  "}",  "="};
      bool matched = false;
      for (const char* op : ops) {
        if (!starts(i, op)) continue;
        if (op[0] == '{' && op[1] == 0) ++brace_depth;
        if (op[0] == '}' && op[1] == 0) --brace_depth;
        tokens.push_back({TokenKind::Op, op, at(i)});
        i += std::char_traits<char>::length(op);
        matched = true;
        break;
      }
      if (!matched) fail(at(i), std::string("unexpected character '") + c + "'");
    }
    if (!closed)
      fail(at(open),
           std::string("unclosed '") + (is_expr ? "{{" : "{%") + "' (no '" + closer + "')");
  }
  tokens.push_back({TokenKind::End, "", src.origin.back()});
  return tokens;
}

// ---------------------------------------------------------------------------------------------
// Syntax tree

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,
    Name,
    Attribute,
    Item,
    Slice,
    Call,
    Filter,
    Test,
    Unary,
    Binary,
    Conditional,
    ListLit,
    DictLit
  };
  Kind kind;
  size_t offset;
  std::string name;  // Name, Attribute, Call-less names, operator, filter or test name
  Value literal;
  bool negated = false;           // `is not`
  std::vector<ExprPtr> children;  // operands (may hold nullptr: absent slice bound)
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // Call, Filter
};

struct Node {
  enum class Kind { Text, Output, Set, For, If };
  Kind kind;
  size_t offset;
  std::string text;                       // Text
  ExprPtr expr;                           // Output, Set value, For iterable
  std::vector<std::string> targets;       // Set: {name} or {name, attribute}; For: loop variables
  ExprPtr filter;                         // For ... if filter
  std::vector<ExprPtr> conditions;        // If: one per branch, nullptr for else
  std::vector<std::vector<Node>> bodies;  // If: one per branch; For: {body, else body}
};

Node make_node(Node::Kind kind, size_t offset) {
  Node n;
  n.kind = kind;
  n.offset = offset;
  return n;
}

struct Program {
  std::string source;
  std::vector<Node> nodes;
};

// ---------------------------------------------------------------------------------------------
// Parser

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  std::vector<Node> parse_template() {
    std::string found;
    auto nodes = parse_body({}, &found, 0, "");
    return nodes;
  }

 private:
  const Token& peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  const Token& next() { return tokens_[std::min(pos_++, tokens_.size() - 1)]; }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::Op && peek(ahead).text == op;
  }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::Name && peek(ahead).text == name;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::End:
        return "end of template";
      case TokenKind::Text:
        return "text";
      case TokenKind::String:
        return "string literal";
      default:
        return "'" + t.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!is_op(op))
      fail(peek().offset, std::string("expected '") + op + "', got " + describe(peek()));
    ++pos_;
  }
  void expect(TokenKind kind, const char* what) {
    if (peek().kind != kind)
      fail(peek().offset, std::string("expected ") + what + ", got " + describe(peek()));
    ++pos_;
  }
  std::string expect_name() {
    if (peek().kind != TokenKind::Name)
      fail(peek().offset, "expected a name, got " + describe(peek()));
    return next().text;
  }

  // Statements up to one of `terminators` (the keyword is consumed, the rest of its tag is not).
  std::vector<Node> parse_body(const std::vector<std::string>& terminators, std::string* found,
                               size_t opened_at, const std::string& block) {
    std::vector<Node> nodes;
    for (;;) {
      const Token& t = peek();
      if (t.kind == TokenKind::End) {
        if (!terminators.empty())
          fail(opened_at, "unclosed '{% " + block + " %}' (no '{% end" + block + " %}')");
        return nodes;
      }
      if (t.kind == TokenKind::Text) {
        Node n = make_node(Node::Kind::Text, t.offset);
        n.text = t.text;
        nodes.push_back(std::move(n));
        ++pos_;
        continue;
      }
      if (t.kind == TokenKind::ExprOpen) {
        ++pos_;
        Node n = make_node(Node::Kind::Output, t.offset);
        n.expr = parse_expression();
        expect(TokenKind::ExprClose, "'}}'");
        nodes.push_back(std::move(n));
        continue;
      }
      if (t.kind != TokenKind::StmtOpen) fail(t.offset, "unexpected " + describe(t));
      const Token& keyword = peek(1);
      if (keyword.kind != TokenKind::Name)
        fail(keyword.offset, "expected a statement name, got " + describe(keyword));
      if (std::find(terminators.begin(), terminators.end(), keyword.text) != terminators.end()) {
        pos_ += 2;
        *found = keyword.text;
        return nodes;
      }
      pos_ += 2;
      nodes.push_back(parse_statement(keyword));
    }
  }

  Node parse_statement(const Token& keyword) {
    const std::string& k = keyword.text;
    if (k == "set") {
      Node n = make_node(Node::Kind::Set, keyword.offset);
      n.targets.push_back(expect_name());
      if (is_op(".")) {
        ++pos_;
        n.targets.push_back(expect_name());
      }
      if (!is_op("=")) fail(peek().offset, "expected '=' in set (block set is not supported)");
      ++pos_;
      n.expr = parse_expression();
      expect(TokenKind::StmtClose, "'%}'");
      return n;
    }
    if ((k == "for" || k == "if") && block_depth_ >= kMaxBlockDepth)
      fail(keyword.offset, "blocks nested more than " + std::to_string(kMaxBlockDepth) + " deep");
    struct BlockDepth {
      size_t& depth;
      ~BlockDepth() { --depth; }
    } block_depth{++block_depth_};
    if (k == "for") {
      Node n = make_node(Node::Kind::For, keyword.offset);
      n.targets.push_back(expect_name());
      while (is_op(",")) {
        ++pos_;
        n.targets.push_back(expect_name());
      }
      if (!is_name("in")) fail(peek().offset, "expected 'in' in for, got " + describe(peek()));
      ++pos_;
      n.expr = parse_or();
      if (is_name("if")) {
        ++pos_;
        n.filter = parse_expression();
      }
      expect(TokenKind::StmtClose, "'%}'");
      std::string found;
      n.bodies.push_back(parse_body({"else", "endfor"}, &found, keyword.offset, "for"));
      if (found == "else") {
        expect(TokenKind::StmtClose, "'%}'");
        n.bodies.push_back(parse_body({"endfor"}, &found, keyword.offset, "for"));
      } else {
        n.bodies.emplace_back();
      }
      expect(TokenKind::StmtClose, "'%}'");
      return n;
    }
    if (k == "if") {
      Node n = make_node(Node::Kind::If, keyword.offset);
      n.conditions.push_back(parse_expression());
      expect(TokenKind::StmtClose, "'%}'");
      for (;;) {
        std::string found;
        n.bodies.push_back(parse_body({"elif", "else", "endif"}, &found, keyword.offset, "if"));
        if (found == "endif") break;
        if (found == "elif") {
          n.conditions.push_back(parse_expression());
          expect(TokenKind::StmtClose, "'%}'");
          continue;
        }
        expect(TokenKind::StmtClose, "'%}'");
        n.conditions.push_back(nullptr);
        n.bodies.push_back(parse_body({"endif"}, &found, keyword.offset, "if"));
        break;
      }
      expect(TokenKind::StmtClose, "'%}'");
      return n;
    }
    fail(keyword.offset, "unsupported statement '" + k + "'");
  }

  ExprPtr make(Expr::Kind kind, size_t offset, std::string name = "") {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->offset = offset;
    e->name = std::move(name);
    return e;
  }

  ExprPtr parse_expression() {
    struct DepthGuard {  // nesting bound, so a hostile template cannot overflow the stack
      size_t& depth;
      DepthGuard(size_t& d, size_t offset) : depth(d) {
        if (++depth > 200) fail(offset, "expression nested too deeply");
      }
      ~DepthGuard() { --depth; }
    } guard(depth_, peek().offset);
    auto value = parse_or();
    if (is_name("if")) {
      const size_t at = next().offset;
      auto condition = parse_or();
      ExprPtr otherwise;
      if (is_name("else")) {
        ++pos_;
        otherwise = parse_expression();
      }
      auto e = make(Expr::Kind::Conditional, at);
      e->children.push_back(std::move(value));
      e->children.push_back(std::move(condition));
      e->children.push_back(std::move(otherwise));
      return e;
    }
    return value;
  }

  ExprPtr binary(const std::string& op, size_t offset, ExprPtr left, ExprPtr right) {
    auto e = make(Expr::Kind::Binary, offset, op);
    e->children.push_back(std::move(left));
    e->children.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_or() {
    auto left = parse_and();
    while (is_name("or")) {
      const size_t at = next().offset;
      left = binary("or", at, std::move(left), parse_and());
    }
    return left;
  }
  ExprPtr parse_and() {
    auto left = parse_not();
    while (is_name("and")) {
      const size_t at = next().offset;
      left = binary("and", at, std::move(left), parse_not());
    }
    return left;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      auto e = make(Expr::Kind::Unary, next().offset, "not");
      e->children.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    auto left = parse_math1();
    for (;;) {
      const Token& t = peek();
      std::string op;
      if (t.kind == TokenKind::Op && (t.text == "==" || t.text == "!=" || t.text == "<" ||
                                      t.text == "<=" || t.text == ">" || t.text == ">=")) {
        op = t.text;
        ++pos_;
      } else if (is_name("in")) {
        op = "in";
        ++pos_;
      } else if (is_name("not") && is_name("in", 1)) {
        op = "not in";
        pos_ += 2;
      } else {
        return left;
      }
      left = binary(op, t.offset, std::move(left), parse_math1());
    }
  }
  ExprPtr parse_math1() {
    auto left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      left = binary(t.text, t.offset, std::move(left), parse_concat());
    }
    return left;
  }
  ExprPtr parse_concat() {
    auto left = parse_math2();
    while (is_op("~")) {
      const size_t at = next().offset;
      left = binary("~", at, std::move(left), parse_math2());
    }
    return left;
  }
  ExprPtr parse_math2() {
    auto left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      left = binary(t.text, t.offset, std::move(left), parse_pow());
    }
    return left;
  }
  ExprPtr parse_pow() {
    auto left = parse_unary(true);
    while (is_op("**")) {
      const size_t at = next().offset;
      left = binary("**", at, std::move(left), parse_unary(true));
    }
    return left;
  }
  ExprPtr parse_unary(bool with_filter) {
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      node = make(Expr::Kind::Unary, t.offset, t.text);
      node->children.push_back(parse_unary(false));
    } else {
      node = parse_postfix(parse_primary());
    }
    return with_filter ? parse_filters(std::move(node)) : std::move(node);
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    switch (t.kind) {
      case TokenKind::Name: {
        ++pos_;
        auto e = make(Expr::Kind::Literal, t.offset);
        if (t.text == "true" || t.text == "True")
          e->literal = Value::of(true);
        else if (t.text == "false" || t.text == "False")
          e->literal = Value::of(false);
        else if (t.text == "none" || t.text == "None")
          e->literal = Value::none();
        else {
          e->kind = Expr::Kind::Name;
          e->name = t.text;
        }
        return e;
      }
      case TokenKind::String: {
        std::string value;
        while (peek().kind == TokenKind::String) value += next().text;  // adjacent literals join
        auto e = make(Expr::Kind::Literal, t.offset);
        e->literal = Value::of(std::move(value));
        return e;
      }
      case TokenKind::Int: {
        ++pos_;
        auto e = make(Expr::Kind::Literal, t.offset);
        e->literal = Value::of(t.integer);
        return e;
      }
      case TokenKind::Float: {
        ++pos_;
        auto e = make(Expr::Kind::Literal, t.offset);
        e->literal = Value::of(t.number);
        return e;
      }
      case TokenKind::Op:
        if (t.text == "(") {
          ++pos_;
          auto inner = parse_expression();
          if (is_op(",")) {  // a tuple: evaluated as a list
            auto list = make(Expr::Kind::ListLit, t.offset);
            list->children.push_back(std::move(inner));
            while (is_op(",")) {
              ++pos_;
              if (is_op(")")) break;
              list->children.push_back(parse_expression());
            }
            inner = std::move(list);
          }
          expect_op(")");
          return inner;
        }
        if (t.text == "[") {
          ++pos_;
          auto list = make(Expr::Kind::ListLit, t.offset);
          while (!is_op("]")) {
            list->children.push_back(parse_expression());
            if (!is_op(",")) break;
            ++pos_;
          }
          expect_op("]");
          return list;
        }
        if (t.text == "{") {
          ++pos_;
          auto dict = make(Expr::Kind::DictLit, t.offset);
          while (!is_op("}")) {
            dict->children.push_back(parse_expression());
            expect_op(":");
            dict->children.push_back(parse_expression());
            if (!is_op(",")) break;
            ++pos_;
          }
          expect_op("}");
          return dict;
        }
        break;
      default:
        break;
    }
    fail(t.offset, "expected an expression, got " + describe(t));
  }

  void parse_arguments(Expr& call) {  // after '('
    while (!is_op(")")) {
      if (peek().kind == TokenKind::Name && is_op("=", 1)) {
        std::string key = next().text;
        ++pos_;
        call.kwargs.emplace_back(std::move(key), parse_expression());
      } else {
        if (!call.kwargs.empty()) fail(peek().offset, "positional argument after keyword argument");
        call.children.push_back(parse_expression());
      }
      if (!is_op(",")) break;
      ++pos_;
    }
    expect_op(")");
  }

  ExprPtr parse_postfix(ExprPtr node) {
    for (;;) {
      if (is_op(".")) {
        const size_t at = next().offset;
        auto e = make(Expr::Kind::Attribute, at, expect_name());
        e->children.push_back(std::move(node));
        node = std::move(e);
      } else if (is_op("[")) {
        const size_t at = next().offset;
        ExprPtr start, stop, step;
        if (!is_op(":")) start = parse_expression();
        if (is_op(":")) {
          ++pos_;
          if (!is_op(":") && !is_op("]")) stop = parse_expression();
          if (is_op(":")) {
            ++pos_;
            if (!is_op("]")) step = parse_expression();
          }
          auto e = make(Expr::Kind::Slice, at);
          e->children.push_back(std::move(node));
          e->children.push_back(std::move(start));
          e->children.push_back(std::move(stop));
          e->children.push_back(std::move(step));
          node = std::move(e);
        } else {
          auto e = make(Expr::Kind::Item, at);
          e->children.push_back(std::move(node));
          e->children.push_back(std::move(start));
          node = std::move(e);
        }
        expect_op("]");
      } else if (is_op("(")) {
        const size_t at = next().offset;
        auto e = make(Expr::Kind::Call, at);
        e->children.push_back(std::move(node));
        parse_arguments(*e);
        node = std::move(e);
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filters(ExprPtr node) {
    for (;;) {
      if (is_op("|")) {
        ++pos_;
        const size_t at = peek().offset;
        auto e = make(Expr::Kind::Filter, at, expect_name());
        e->children.push_back(std::move(node));
        if (is_op("(")) {
          ++pos_;
          parse_arguments(*e);
        }
        node = std::move(e);
      } else if (is_name("is")) {
        ++pos_;
        bool negated = false;
        if (is_name("not")) {
          ++pos_;
          negated = true;
        }
        const size_t at = peek().offset;
        auto e = make(Expr::Kind::Test, at, expect_name());
        e->negated = negated;
        e->children.push_back(std::move(node));
        if (is_op("(")) {
          ++pos_;
          parse_arguments(*e);
        }
        node = std::move(e);
      } else {
        return node;
      }
    }
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  size_t depth_ = 0;
  size_t block_depth_ = 0;  // {% for %} / {% if %} blocks open (kMaxBlockDepth)
};

// ---------------------------------------------------------------------------------------------
// Evaluation

class Renderer {
 public:
  explicit Renderer(Value globals)
      : max_steps_(saturated_sum(kMaxRenderSteps,
                                 saturated_product(globals.values(), kRenderStepsPerContextValue))),
        max_text_(saturated_sum(
            saturated_sum(kMaxRenderText,
                          saturated_product(globals.bytes(), kRenderTextPerContextByte)),
            saturated_product(globals.values(), kRenderTextPerContextValue))) {
    frames_.push_back(std::move(*globals.dict));
  }
  // A namespace is the one value changed after it is made, so a cycle of shared values runs
  // through one (`{% set ns.x = ns %}`, `{% set ns.x = [ns] %}`): emptying every namespace of the
  // render frees them all.
  ~Renderer() {
    for (const std::shared_ptr<Dict>& fields : namespaces_) fields->clear();
  }
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  void render(const std::vector<Node>& nodes, std::string& out) {
    for (const Node& n : nodes) render(n, out);
  }

 private:
  void render(const Node& n, std::string& out) {
    step(n.offset);
    if (out.size() > kMaxRenderBytes)
      fail(n.offset,
           "the template renders more than " + std::to_string(kMaxRenderBytes >> 20) + " MiB");
    switch (n.kind) {
      case Node::Kind::Text:
        out += n.text;
        return;
      case Node::Kind::Output:
        out += text_of(eval(*n.expr), n.offset);
        return;
      case Node::Kind::Set: {
        Value value = eval(*n.expr);
        if (n.targets.size() == 1) {
          step(n.offset, frames_.back().size());
          dict_set(frames_.back(), n.targets[0], std::move(value));
          return;
        }
        const Value target = lookup(n.targets[0], n.offset);
        if (!target.is(Value::Kind::Namespace))
          fail(n.offset, "cannot set attribute '" + n.targets[1] + "' of " +
                             kind_name(target.kind) + " '" + n.targets[0] +
                             "' (only of a namespace)");
        step(n.offset, target.dict->size());
        dict_set(*target.dict, n.targets[1], std::move(value));
        return;
      }
      case Node::Kind::If:
        for (size_t b = 0; b < n.bodies.size(); ++b) {
          if (!n.conditions[b] || truthy(eval(*n.conditions[b]))) {
            render(n.bodies[b], out);
            return;
          }
        }
        return;
      case Node::Kind::For:
        render_for(n, out);
        return;
    }
  }

  void bind_targets(const Node& n, const Value& item, Dict& frame) {
    if (n.targets.size() == 1) {
      dict_set(frame, n.targets[0], item);
      return;
    }
    if (!item.is(Value::Kind::List) || item.list->size() != n.targets.size())
      fail(n.offset, "cannot unpack " + std::string(kind_name(item.kind)) + " into " +
                         std::to_string(n.targets.size()) + " loop variables");
    for (size_t t = 0; t < n.targets.size(); ++t) dict_set(frame, n.targets[t], (*item.list)[t]);
  }

  // The work budgets (kMaxRenderSteps, kMaxRenderText), charged before the work is done.
  void step(size_t offset, uint64_t count = 1) {
    if (count > max_steps_ - steps_)
      fail(offset,
           "the template takes more than " + std::to_string(max_steps_) + " steps to render");
    steps_ += count;
  }
  void charge_text(size_t offset, uint64_t bytes) {
    if (bytes > max_text_ - text_)
      fail(offset, "the template handles more than " + std::to_string(max_text_ >> 20) +
                       " MiB of text to render");
    text_ += bytes;
  }
  // Printing, comparing or copying all of `v`.
  void charge(const Value& v, size_t offset) {
    step(offset, v.values());
    charge_text(offset, v.bytes());
  }
  // What `{{ v }}` prints (to_string), its cost charged.
  std::string text_of(const Value& v, size_t offset) {
    if (v.is(Value::Kind::List) || v.is(Value::Kind::Dict)) charge(v, offset);
    return to_string(v);
  }
  // The items of iterate(v), the copy charged (a string's characters are values each).
  List items_of(const Value& v, size_t offset) {
    if (v.is(Value::Kind::String)) step(offset, v.string.size());
    charge(v, offset);
    return iterate(v, offset);
  }
  // Copying the entries of `dict` (its keys and values; lists and dicts inside are shared).
  void charge_entries(const Dict& dict, size_t offset) {
    step(offset, dict.size());
    for (const auto& [k, v] : dict) charge_text(offset, k.size() + v.string.size());
  }
  const Value* find(const Dict& dict, const std::string& key, size_t offset) {
    step(offset, dict.size() + 1);
    return dict_find(dict, key);
  }

  bool equal(const Value& a, const Value& b, size_t offset) {
    step(offset);
    if (a.is_number() && b.is_number()) {
      if (a.is(Value::Kind::Int) && b.is(Value::Kind::Int)) return a.integer == b.integer;
      return a.as_double() == b.as_double();
    }
    if (a.kind != b.kind) return false;
    switch (a.kind) {
      case Value::Kind::Undefined:
      case Value::Kind::None:
        return true;
      case Value::Kind::Bool:
        return a.boolean == b.boolean;
      case Value::Kind::String:
        if (a.string.size() != b.string.size()) return false;
        charge_text(offset, a.string.size());  // elements of lists are not charged by eval
        return a.string == b.string;
      case Value::Kind::List:
        if (a.list->size() != b.list->size()) return false;
        for (size_t i = 0; i < a.list->size(); ++i)
          if (!equal((*a.list)[i], (*b.list)[i], offset)) return false;
        return true;
      case Value::Kind::Dict:
        if (a.dict->size() != b.dict->size()) return false;
        for (const auto& [k, e] : *a.dict) {
          charge_text(offset, k.size());
          const Value* other = find(*b.dict, k, offset);
          if (!other || !equal(e, *other, offset)) return false;
        }
        return true;
      case Value::Kind::Namespace:
        return a.dict == b.dict;
      default:
        return false;
    }
  }

  void render_for(const Node& n, std::string& out) {
    List items = items_of(eval(*n.expr), n.expr->offset);
    if (n.filter) {
      List kept;
      for (const Value& item : items) {
        step(n.offset);
        frames_.emplace_back();
        bind_targets(n, item, frames_.back());
        const bool keep = truthy(eval(*n.filter));
        frames_.pop_back();
        if (keep) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      render(n.bodies[1], out);
      return;
    }
    const int64_t length = (int64_t)items.size();
    for (int64_t i = 0; i < length; ++i) {
      step(n.offset, kStepsPerLoopIteration);
      charge_text(n.offset, 3 * items[i].string.size());  // loop.previtem, loop.nextitem, target
      Dict loop = {{"index0", Value::of(i)},
                   {"index", Value::of(i + 1)},
                   {"revindex0", Value::of(length - 1 - i)},
                   {"revindex", Value::of(length - i)},
                   {"first", Value::of(i == 0)},
                   {"last", Value::of(i == length - 1)},
                   {"length", Value::of(length)},
                   {"previtem", i > 0 ? items[i - 1] : Value()},
                   {"nextitem", i + 1 < length ? items[i + 1] : Value()}};
      frames_.emplace_back();
      dict_set(frames_.back(), "loop", Value::of(std::move(loop)));
      bind_targets(n, items[i], frames_.back());
      render(n.bodies[0], out);
      frames_.pop_back();
    }
  }

  Value lookup(const std::string& name, size_t offset) {
    for (auto frame = frames_.rbegin(); frame != frames_.rend(); ++frame)
      if (const Value* v = find(*frame, name, offset)) return *v;
    return Value();
  }

  static int64_t as_int(const Value& v, size_t offset, const char* what) {
    if (v.is(Value::Kind::Int)) return v.integer;
    if (v.is(Value::Kind::Bool)) return v.boolean;
    fail(offset, std::string(what) + " must be an integer, got " + kind_name(v.kind));
  }
  static const std::string& as_string(const Value& v, size_t offset, const char* what) {
    if (!v.is(Value::Kind::String))
      fail(offset, std::string(what) + " must be a string, got " + kind_name(v.kind));
    return v.string;
  }

  Value item(const Value& container, const Value& key, size_t offset) {
    if (container.is_mapping()) {
      const Value* v = find(
          *container.dict, key.is(Value::Kind::String) ? key.string : text_of(key, offset), offset);
      return v ? *v : Value();
    }
    if (container.is(Value::Kind::List) || container.is(Value::Kind::String)) {
      if (!key.is(Value::Kind::Int)) return Value();
      std::vector<std::string> chars;
      if (container.is(Value::Kind::String)) {
        step(offset, container.string.size());
        chars = utf8_characters(container.string);
      }
      const int64_t n =
          container.is(Value::Kind::List) ? (int64_t)container.list->size() : (int64_t)chars.size();
      int64_t i = key.integer < 0 ? key.integer + n : key.integer;
      if (i < 0 || i >= n) return Value();
      return container.is(Value::Kind::List) ? (*container.list)[i] : Value::of(chars[i]);
    }
    if (container.is(Value::Kind::Undefined) || container.is(Value::Kind::None))
      fail(offset, std::string("cannot access '") + text_of(key, offset) + "' of " +
                       kind_name(container.kind));
    return Value();
  }

  Value slice(const Value& container, const Expr& e) {
    auto bound = [&](const ExprPtr& x) -> std::optional<int64_t> {
      if (!x) return std::nullopt;
      Value v = eval(*x);
      if (v.is(Value::Kind::None)) return std::nullopt;
      return as_int(v, x->offset, "a slice bound");
    };
    const auto start = bound(e.children[1]), stop = bound(e.children[2]),
               step_opt = bound(e.children[3]);
    const int64_t step = step_opt.value_or(1);
    if (step == 0) fail(e.offset, "slice step cannot be zero");
    List source;
    const bool is_string = container.is(Value::Kind::String);
    if (is_string || container.is(Value::Kind::List))
      source = items_of(container, e.offset);
    else
      fail(e.offset, std::string("cannot slice a ") + kind_name(container.kind));
    const int64_t n = (int64_t)source.size();
    auto adjust = [&](std::optional<int64_t> b,
                      int64_t fallback) {  // Python's PySlice_AdjustIndices
      if (!b) return fallback;
      int64_t v = *b;
      if (v < 0) v += n;
      if (v < 0) v = step < 0 ? -1 : 0;
      if (v >= n) v = step < 0 ? n - 1 : n;
      return v;
    };
    const int64_t begin = adjust(start, step < 0 ? n - 1 : 0),
                  end = adjust(stop, step < 0 ? -1 : n);
    List picked;
    for (int64_t i = begin; step > 0 ? i < end : i > end; i += step) picked.push_back(source[i]);
    if (!is_string) return Value::of(std::move(picked));
    std::string text;
    for (const Value& c : picked) text += c.string;
    return Value::of(std::move(text));
  }

  Value attribute(const Value& object, const std::string& name, size_t offset) {
    if (object.is_mapping()) {
      const Value* v = find(*object.dict, name, offset);
      return v ? *v : Value();
    }
    if (object.is(Value::Kind::Undefined) || object.is(Value::Kind::None))
      fail(offset, "cannot read attribute '" + name + "' of " + kind_name(object.kind));
    return Value();
  }

  Value arithmetic(const std::string& op, const Value& a, const Value& b, size_t offset) {
    if (op == "~") return Value::of(text_of(a, offset) + text_of(b, offset));
    if (op == "+") {
      if (a.is(Value::Kind::List) && b.is(Value::Kind::List)) {
        charge(a, offset);
        charge(b, offset);
        List joined = *a.list;
        joined.insert(joined.end(), b.list->begin(), b.list->end());
        return Value::of(std::move(joined));
      }
      if (a.is(Value::Kind::String) || b.is(Value::Kind::String)) {
        return Value::of(text_of(a, offset) + text_of(b, offset));
      }
    }
    if (op == "*" && a.is(Value::Kind::String) && b.is(Value::Kind::Int)) {
      if (b.integer > 0 &&
          (uint64_t)b.integer > kMaxElements / std::max<uint64_t>(1, a.string.size()))
        fail(offset, "string repetition too large");
      if (b.integer <= 0 || a.string.empty()) return Value::of(std::string());
      charge_text(offset, (uint64_t)b.integer * a.string.size());
      std::string repeated;
      repeated.reserve((size_t)b.integer * a.string.size());
      for (int64_t i = 0; i < b.integer; ++i) repeated += a.string;
      return Value::of(std::move(repeated));
    }
    if (!a.is_number() || !b.is_number())
      fail(offset, "unsupported operand types for " + op + ": " + kind_name(a.kind) + " and " +
                       kind_name(b.kind));
    const bool integers = a.is(Value::Kind::Int) && b.is(Value::Kind::Int);
    const double x = a.as_double(), y = b.as_double();
    int64_t r = 0;
    auto overflow = [&] { fail(offset, "integer overflow in " + op); };
    if (op == "+") {
      if (!integers) return Value::of(x + y);
      if (__builtin_add_overflow(a.integer, b.integer, &r)) overflow();
      return Value::of(r);
    }
    if (op == "-") {
      if (!integers) return Value::of(x - y);
      if (__builtin_sub_overflow(a.integer, b.integer, &r)) overflow();
      return Value::of(r);
    }
    if (op == "*") {
      if (!integers) return Value::of(x * y);
      if (__builtin_mul_overflow(a.integer, b.integer, &r)) overflow();
      return Value::of(r);
    }
    if (op == "**") {
      if (integers && b.integer >= 0) {  // by squaring: time logarithmic in the exponent
        int64_t base = a.integer;
        r = 1;
        for (int64_t e = b.integer; e > 0; e >>= 1) {
          if ((e & 1) && __builtin_mul_overflow(r, base, &r)) overflow();
          if (e > 1 && __builtin_mul_overflow(base, base, &base)) overflow();
        }
        return Value::of(r);
      }
      return Value::of(std::pow(x, y));
    }
    if (y == 0) fail(offset, "division by zero");
    if (op == "/") return Value::of(x / y);
    if (integers && a.integer == INT64_MIN && b.integer == -1 && (op == "//" || op == "%"))
      overflow();
    if (op == "//") {
      if (integers) {
        int64_t q = a.integer / b.integer;
        if ((a.integer % b.integer != 0) && ((a.integer < 0) != (b.integer < 0))) --q;
        return Value::of(q);
      }
      return Value::of(std::floor(x / y));
    }
    if (op == "%") {
      if (integers) {
        int64_t r = a.integer % b.integer;
        if (r != 0 && ((r < 0) != (b.integer < 0))) r += b.integer;
        return Value::of(r);
      }
      double r = std::fmod(x, y);
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
      return Value::of(r);
    }
    fail(offset, "unknown operator " + op);
  }

  bool contains(const Value& haystack, const Value& needle, size_t offset) {
    if (haystack.is(Value::Kind::String))
      return TextFinder(as_string(needle, offset, "the left operand of 'in' a string"))
                 .find(haystack.string, 0) != std::string::npos;
    if (haystack.is(Value::Kind::List)) {
      for (const Value& v : *haystack.list)
        if (equal(v, needle, offset)) return true;
      return false;
    }
    if (haystack.is_mapping())
      return needle.is(Value::Kind::String) && find(*haystack.dict, needle.string, offset);
    if (haystack.is(Value::Kind::Undefined)) return false;
    fail(offset, std::string("'in' needs a string, list or dict on the right, got ") +
                     kind_name(haystack.kind));
  }

  bool compare(const std::string& op, const Value& a, const Value& b, size_t offset) {
    if (op == "==") return equal(a, b, offset);
    if (op == "!=") return !equal(a, b, offset);
    if (op == "in") return contains(b, a, offset);
    if (op == "not in") return !contains(b, a, offset);
    int order;
    if (a.is_number() && b.is_number())
      order = a.as_double() < b.as_double() ? -1 : a.as_double() > b.as_double();
    else if (a.is(Value::Kind::String) && b.is(Value::Kind::String))
      order = a.string.compare(b.string);
    else
      fail(offset,
           "cannot compare " + std::string(kind_name(a.kind)) + " " + op + " " + kind_name(b.kind));
    if (op == "<") return order < 0;
    if (op == "<=") return order <= 0;
    if (op == ">") return order > 0;
    return order >= 0;
  }

  struct Arguments {
    List positional;
    Dict keyword;
    size_t offset;
    std::string callee;
    const Value* get(size_t index, const char* key) const {
      if (index < positional.size()) return &positional[index];
      return dict_find(keyword, key);
    }
    void at_most(size_t n) const {
      if (positional.size() + keyword.size() > n)
        fail(offset, callee + " takes at most " + std::to_string(n) + " argument(s)");
    }
  };

  Arguments arguments(const Expr& e, size_t first, std::string callee) {
    Arguments args{{}, {}, e.offset, std::move(callee)};
    for (size_t i = first; i < e.children.size(); ++i)
      args.positional.push_back(eval(*e.children[i]));
    for (const auto& [k, v] : e.kwargs) {
      step(e.offset, args.keyword.size());
      dict_set(args.keyword, k, eval(*v));
    }
    return args;
  }

  Value string_method(const std::string& s, const std::string& method, const Arguments& args) {
    const size_t at = args.offset;
    if (method == "strip" || method == "lstrip" || method == "rstrip") {
      args.at_most(1);
      const Value* chars = args.get(0, "chars");
      const std::string* set =
          chars && !chars->is(Value::Kind::None) ? &as_string(*chars, at, "chars") : nullptr;
      return Value::of(strip_chars(s, set, method != "rstrip", method != "lstrip"));
    }
    if (method == "upper" || method == "lower") {
      args.at_most(0);
      std::string r = s;
      for (char& c : r)
        c = method == "upper" ? (char)std::toupper((unsigned char)c)
                              : (char)std::tolower((unsigned char)c);
      return Value::of(std::move(r));
    }
    if (method == "capitalize" || method == "title") {
      args.at_most(0);
      std::string r = s;
      bool start = true;
      for (char& c : r) {
        const bool alpha = std::isalpha((unsigned char)c);
        c = start ? (char)std::toupper((unsigned char)c) : (char)std::tolower((unsigned char)c);
        start = method == "title" ? !alpha : false;
      }
      return Value::of(std::move(r));
    }
    if (method == "startswith" || method == "endswith") {
      args.at_most(1);
      const Value* arg = args.get(0, "prefix");
      if (!arg) fail(at, method + " needs an argument");
      List candidates = arg->is(Value::Kind::List) ? items_of(*arg, at) : List{*arg};
      for (const Value& c : candidates) {
        const std::string& p = as_string(c, at, "the argument of startswith/endswith");
        if (p.size() <= s.size() &&
            (method == "startswith" ? s.compare(0, p.size(), p) == 0
                                    : s.compare(s.size() - p.size(), p.size(), p) == 0))
          return Value::of(true);
      }
      return Value::of(false);
    }
    if (method == "split") {
      args.at_most(2);
      const Value* sep = args.get(0, "sep");
      const Value* max = args.get(1, "maxsplit");
      int64_t splits = max ? as_int(*max, at, "maxsplit") : -1;
      List parts;
      if (!sep || sep->is(Value::Kind::None)) {  // runs of whitespace, no empty parts
        size_t i = 0;
        while (true) {
          while (i < s.size() && is_space(s[i])) ++i;
          if (i >= s.size()) break;
          step(at);
          if (splits == 0) {
            parts.push_back(Value::of(strip_chars(s.substr(i), nullptr, false, true)));
            break;
          }
          size_t j = i;
          while (j < s.size() && !is_space(s[j])) ++j;
          parts.push_back(Value::of(s.substr(i, j - i)));
          --splits;
          i = j;
        }
        return Value::of(std::move(parts));
      }
      const std::string& separator = as_string(*sep, at, "the separator");
      if (separator.empty()) fail(at, "split: empty separator");
      const TextFinder finder(separator);
      size_t i = 0;
      for (;;) {
        step(at);
        const size_t j = splits == 0 ? std::string::npos : finder.find(s, i);
        if (j == std::string::npos) {
          parts.push_back(Value::of(s.substr(i)));
          break;
        }
        parts.push_back(Value::of(s.substr(i, j - i)));
        i = j + separator.size();
        --splits;
      }
      return Value::of(std::move(parts));
    }
    if (method == "replace") {
      args.at_most(3);
      const Value* from = args.get(0, "old");
      const Value* to = args.get(1, "new");
      if (!from || !to) fail(at, "replace needs two arguments");
      const Value* count = args.get(2, "count");
      return Value::of(replace(s, as_string(*from, at, "old"), as_string(*to, at, "new"),
                               count ? as_int(*count, at, "count") : -1, at));
    }
    fail(at, "unknown string method '" + method + "'");
  }

  std::string replace(const std::string& s, const std::string& from, const std::string& to,
                      int64_t count, size_t offset) {
    if (from.empty()) return s;
    const TextFinder finder(from);
    std::string out;
    size_t i = 0;
    for (; count != 0; --count) {
      const size_t j = finder.find(s, i);
      if (j == std::string::npos) break;
      step(offset);
      charge_text(offset, to.size());
      out += s.substr(i, j - i) + to;
      i = j + from.size();
    }
    return out + s.substr(i);
  }

  Value dict_items(const Value& d, size_t offset) {
    charge_entries(*d.dict, offset);
    step(offset, 2 * d.dict->size());
    List items;
    for (const auto& [k, v] : *d.dict) items.push_back(Value::of(List{Value::of(k), v}));
    return Value::of(std::move(items));
  }

  Value call(const Expr& e) {
    const Expr& callee = *e.children[0];
    if (callee.kind == Expr::Kind::Name) {
      Arguments args = arguments(e, 1, callee.name);
      if (callee.name == "raise_exception") {
        const Value* message = args.get(0, "message");
        fail(callee.offset,
             "raise_exception: " + (message ? text_of(*message, e.offset) : std::string()));
      }
      if (callee.name == "namespace") {
        Dict fields;
        if (!args.positional.empty()) {
          if (args.positional.size() > 1 || !args.positional[0].is_mapping())
            fail(e.offset, "namespace() takes one dict and keyword arguments");
          charge_entries(*args.positional[0].dict, e.offset);
          fields = *args.positional[0].dict;
        }
        for (const auto& [k, v] : args.keyword) {
          step(e.offset, fields.size());
          dict_set(fields, k, v);
        }
        Value made = Value::of(std::move(fields), Value::Kind::Namespace);
        namespaces_.push_back(made.dict);
        return made;
      }
      if (callee.name == "range") {
        int64_t start = 0, stop = 0, step = 1;
        const size_t n = args.positional.size();
        if (n == 1)
          stop = as_int(args.positional[0], e.offset, "range()");
        else if (n == 2 || n == 3) {
          start = as_int(args.positional[0], e.offset, "range()");
          stop = as_int(args.positional[1], e.offset, "range()");
          if (n == 3) step = as_int(args.positional[2], e.offset, "range()");
        } else
          fail(e.offset, "range() takes 1 to 3 arguments");
        if (step == 0) fail(e.offset, "range() step cannot be zero");
        const __int128 count = ((__int128)stop - start + step + (step > 0 ? -1 : 1)) / step;
        if (count > (__int128)kMaxElements) fail(e.offset, "range() too large");
        if (count > 0) this->step(e.offset, (uint64_t)count);
        List values;
        for (__int128 i = 0; i < count; ++i)
          values.push_back(Value::of((int64_t)(start + i * step)));
        return Value::of(std::move(values));
      }
      fail(callee.offset, "unknown function '" + callee.name + "'");
    }
    if (callee.kind == Expr::Kind::Attribute) {
      const Value object = eval(*callee.children[0]);
      Arguments args = arguments(e, 1, callee.name + "()");
      if (object.is(Value::Kind::String)) return string_method(object.string, callee.name, args);
      if (object.is(Value::Kind::Dict)) {
        if (callee.name == "items") {
          args.at_most(0);
          return dict_items(object, e.offset);
        }
        if (callee.name == "keys" || callee.name == "values") {
          args.at_most(0);
          charge_entries(*object.dict, e.offset);
          List out;
          for (const auto& [k, v] : *object.dict)
            out.push_back(callee.name == "keys" ? Value::of(k) : v);
          return Value::of(std::move(out));
        }
        if (callee.name == "get") {
          args.at_most(2);
          const Value* key = args.get(0, "key");
          if (!key) fail(e.offset, "get() needs a key");
          const Value* found = find(*object.dict, text_of(*key, e.offset), e.offset);
          if (found) return *found;
          const Value* fallback = args.get(1, "default");
          return fallback ? *fallback : Value::none();
        }
      }
      fail(callee.offset,
           std::string("unknown method '") + callee.name + "' of " + kind_name(object.kind));
    }
    fail(e.offset, "this expression cannot be called");
  }

  Value filter(const Expr& e) {
    const Value v = eval(*e.children[0]);
    Arguments args = arguments(e, 1, "filter " + e.name);
    const std::string& f = e.name;
    const size_t at = e.offset;
    if (f == "trim") {
      args.at_most(1);
      const Value* chars = args.get(0, "chars");
      return Value::of(strip_chars(text_of(v, at),
                                   chars ? &as_string(*chars, at, "chars") : nullptr, true, true));
    }
    if (f == "length" || f == "count") {
      args.at_most(0);
      if (v.is(Value::Kind::String)) return Value::of((int64_t)utf8_length(v.string));
      if (v.is(Value::Kind::List)) return Value::of((int64_t)v.list->size());
      if (v.is_mapping()) return Value::of((int64_t)v.dict->size());
      if (v.is(Value::Kind::Undefined)) return Value::of((int64_t)0);
      fail(at, std::string("length of a ") + kind_name(v.kind));
    }
    if (f == "string") {
      args.at_most(0);
      return Value::of(text_of(v, at));
    }
    if (f == "tojson") {
      args.at_most(1);
      charge(v, at);
      return Value::of(to_json(v, at));
    }
    if (f == "default" || f == "d") {
      args.at_most(2);
      const Value* fallback = args.get(0, "default_value");
      const Value* boolean = args.get(1, "boolean");
      const bool use = v.is(Value::Kind::Undefined) || (boolean && truthy(*boolean) && !truthy(v));
      return use ? (fallback ? *fallback : Value::of(std::string())) : v;
    }
    if (f == "first" || f == "last") {
      args.at_most(0);
      List items = items_of(v, at);
      if (items.empty()) return Value();
      return f == "first" ? items.front() : items.back();
    }
    if (f == "join") {
      args.at_most(1);
      const Value* sep = args.get(0, "d");
      std::string out;
      bool first = true;
      for (const Value& item : items_of(v, at)) {
        if (!first && sep) out += text_of(*sep, at);
        if (!first && sep) charge_text(at, sep->bytes());
        out += text_of(item, at);
        first = false;
      }
      return Value::of(std::move(out));
    }
    if (f == "items") {
      args.at_most(0);
      if (v.is(Value::Kind::Undefined)) return Value::of(List{});
      if (!v.is_mapping()) fail(at, std::string("items of a ") + kind_name(v.kind));
      return dict_items(v, at);
    }
    if (f == "upper" || f == "lower" || f == "capitalize" || f == "title")
      return string_method(text_of(v, at), f, args);
    if (f == "replace") return string_method(text_of(v, at), f, args);
    if (f == "list") {
      args.at_most(0);
      return Value::of(items_of(v, at));
    }
    if (f == "reverse") {
      args.at_most(0);
      if (v.is(Value::Kind::String)) {
        step(at, v.string.size());
        auto chars = utf8_characters(v.string);
        std::string r;
        for (auto c = chars.rbegin(); c != chars.rend(); ++c) r += *c;
        return Value::of(std::move(r));
      }
      List items = items_of(v, at);
      std::reverse(items.begin(), items.end());
      return Value::of(std::move(items));
    }
    if (f == "int") {
      args.at_most(1);
      if (v.is(Value::Kind::Int)) return v;
      if (v.is(Value::Kind::Float)) return Value::of((int64_t)v.number);
      if (v.is(Value::Kind::Bool)) return Value::of((int64_t)v.boolean);
      if (v.is(Value::Kind::String)) {
        char* end = nullptr;
        const long long parsed = std::strtoll(v.string.c_str(), &end, 10);
        if (end && *end == 0 && !v.string.empty()) return Value::of((int64_t)parsed);
      }
      const Value* fallback = args.get(0, "default");
      return fallback ? *fallback : Value::of((int64_t)0);
    }
    if (f == "float") {
      args.at_most(1);
      if (v.is_number()) return Value::of(v.as_double());
      if (v.is(Value::Kind::String)) {
        char* end = nullptr;
        const double parsed = std::strtod(v.string.c_str(), &end);
        if (end && *end == 0 && !v.string.empty()) return Value::of(parsed);
      }
      const Value* fallback = args.get(0, "default");
      return fallback ? *fallback : Value::of(0.0);
    }
    if (f == "abs") {
      args.at_most(0);
      if (v.is(Value::Kind::Int)) return Value::of(v.integer < 0 ? -v.integer : v.integer);
      if (v.is(Value::Kind::Float)) return Value::of(std::fabs(v.number));
      fail(at, std::string("abs of a ") + kind_name(v.kind));
    }
    fail(at, "unknown filter '" + f + "'");
  }

  bool test(const Expr& e) {
    const Value v = eval(*e.children[0]);
    Arguments args = arguments(e, 1, "test " + e.name);
    const std::string& t = e.name;
    using K = Value::Kind;
    if (t == "defined") return !v.is(K::Undefined);
    if (t == "undefined") return v.is(K::Undefined);
    if (t == "none") return v.is(K::None);
    if (t == "string") return v.is(K::String);
    if (t == "number") return v.is_number();
    if (t == "integer") return v.is(K::Int);
    if (t == "float") return v.is(K::Float);
    if (t == "boolean") return v.is(K::Bool);
    if (t == "true") return v.is(K::Bool) && v.boolean;
    if (t == "false") return v.is(K::Bool) && !v.boolean;
    if (t == "mapping") return v.is_mapping();
    if (t == "iterable") return v.is(K::List) || v.is(K::String) || v.is(K::Dict);
    if (t == "sequence") return v.is(K::List) || v.is(K::String) || v.is(K::Dict);
    if (t == "callable") return false;
    if (t == "eq" || t == "equalto" || t == "==" || t == "ne" || t == "!=") {
      args.at_most(1);
      if (args.positional.empty()) fail(e.offset, "test " + t + " needs an argument");
      return equal(v, args.positional[0], e.offset) == (t == "eq" || t == "equalto" || t == "==");
    }
    fail(e.offset, "unknown test '" + t + "'");
  }

  // Every expression is a step, and a string result's bytes are charged as text: results are
  // values (a name's string is copied), so an operation linear in its string operands is paid for.
  Value eval(const Expr& e) {
    step(e.offset);
    Value v = evaluate(e);
    if (v.is(Value::Kind::String)) charge_text(e.offset, v.string.size());
    return v;
  }

  Value evaluate(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::Literal:
        return e.literal;
      case Expr::Kind::Name:
        return lookup(e.name, e.offset);
      case Expr::Kind::Attribute:
        return attribute(eval(*e.children[0]), e.name, e.offset);
      case Expr::Kind::Item:
        return item(eval(*e.children[0]), eval(*e.children[1]), e.offset);
      case Expr::Kind::Slice:
        return slice(eval(*e.children[0]), e);
      case Expr::Kind::Call:
        return call(e);
      case Expr::Kind::Filter:
        return filter(e);
      case Expr::Kind::Test:
        return Value::of(test(e) != e.negated);
      case Expr::Kind::Unary: {
        const Value v = eval(*e.children[0]);
        if (e.name == "not") return Value::of(!truthy(v));
        if (v.is(Value::Kind::Int)) return Value::of(e.name == "-" ? -v.integer : v.integer);
        if (v.is(Value::Kind::Float)) return Value::of(e.name == "-" ? -v.number : v.number);
        fail(e.offset,
             std::string("bad operand type for unary ") + e.name + ": " + kind_name(v.kind));
      }
      case Expr::Kind::Binary: {
        if (e.name == "and" || e.name == "or") {  // Python semantics: the deciding operand
          Value left = eval(*e.children[0]);
          if (truthy(left) == (e.name == "or")) return left;
          return eval(*e.children[1]);
        }
        const Value a = eval(*e.children[0]), b = eval(*e.children[1]);
        if (e.name == "==" || e.name == "!=" || e.name == "<" || e.name == "<=" || e.name == ">" ||
            e.name == ">=" || e.name == "in" || e.name == "not in")
          return Value::of(compare(e.name, a, b, e.offset));
        return arithmetic(e.name, a, b, e.offset);
      }
      case Expr::Kind::Conditional:
        if (truthy(eval(*e.children[1]))) return eval(*e.children[0]);
        return e.children[2] ? eval(*e.children[2]) : Value();
      case Expr::Kind::ListLit: {
        List items;
        for (const auto& c : e.children) items.push_back(eval(*c));
        return Value::of(std::move(items));
      }
      case Expr::Kind::DictLit: {
        Dict dict;
        for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
          const Value key = eval(*e.children[i]);
          step(e.offset, dict.size());
          dict_set(dict, key.is(Value::Kind::String) ? key.string : text_of(key, e.offset),
                   eval(*e.children[i + 1]));
        }
        return Value::of(std::move(dict));
      }
    }
    fail(e.offset, "unknown expression");
  }

  std::vector<Dict> frames_;             // innermost last; frames_[0] holds the context
  std::vector<std::shared_ptr<Dict>> namespaces_;  // every namespace() of this render
  const uint64_t max_steps_, max_text_;  // the budgets of this render
  uint64_t steps_ = 0, text_ = 0;        // spent
};

Error located_error(const std::string& source, const TemplateError& error) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < error.offset && i < source.size(); ++i) {
    if (source[i] == '\n') {
      ++line;
      column = 1;
    } else if (((unsigned char)source[i] & 0xC0) != 0x80) {
      ++column;
    }
  }
  return make_error("chat template line ", line, ", column ", column, ": ", error.message);
}

}  // namespace chat_template_detail

Result<ChatTemplate> chat_template_parse(const std::string& source) {
  using namespace chat_template_detail;
  try {
    auto program = std::make_shared<Program>();
    program->source = source;
    Parser parser(lex(preprocess(source)));
    program->nodes = parser.parse_template();
    ChatTemplate result;
    result.program_ = std::move(program);
    return result;
  } catch (const TemplateError& error) {
    return located_error(source, error);
  }
}

Result<std::string> ChatTemplate::render(const Json& context) const {
  return render_value(&context, nullptr);
}

Result<std::string> ChatTemplate::render(const OrderedJson& context) const {
  return render_value(nullptr, &context);
}

Result<std::string> ChatTemplate::render_value(const Json* context,
                                               const OrderedJson* ordered) const {
  using namespace chat_template_detail;
  if (!program_) return make_error("chat template: not parsed");
  if (context ? !context->is_object() : !ordered->is_object())
    return make_error("chat template: the context must be a JSON object");
  try {
    Renderer renderer(context ? from_json(*context) : from_json(*ordered));
    std::string out;
    renderer.render(program_->nodes, out);
    return out;
  } catch (const TemplateError& error) {
    return located_error(program_->source, error);
  }
}

Json chat_template_context(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                           const std::string& bos_token, const std::string& eos_token,
                           std::optional<bool> enable_thinking) {
  Json list = Json::array();
  for (const ChatMessage& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  Json context = {{"messages", list},
                  {"add_generation_prompt", add_generation_prompt},
                  {"bos_token", bos_token},
                  {"eos_token", eos_token}};
  if (enable_thinking) context["enable_thinking"] = *enable_thinking;
  return context;
}

Result<ChatTemplateConfig> chat_template_config_read(const std::string& tokenizer_config_path) {
  GL_ASSIGN_OR_RETURN(Json config, json_read_file(tokenizer_config_path));
  if (!config.is_object()) return make_error(tokenizer_config_path, ": expected a JSON object");
  ChatTemplateConfig out;
  auto token = [&](const char* key, std::string& into) -> Status {
    auto it = config.find(key);
    if (it == config.end() || it->is_null()) return ok_status();
    if (it->is_string())
      into = it->get<std::string>();
    else if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
      into = (*it)["content"].get<std::string>();
    else
      return make_error(tokenizer_config_path, ": field '", key,
                        "' must be a string or {\"content\": ...}");
    return ok_status();
  };
  GL_TRY(token("bos_token", out.bos_token));
  GL_TRY(token("eos_token", out.eos_token));
  auto it = config.find("chat_template");
  if (it != config.end() && !it->is_null()) {
    if (!it->is_string())  // newer configs may hold a list of named templates
      return make_error(
          tokenizer_config_path,
          ": field 'chat_template' must be a string (named templates are not supported)");
    out.chat_template = it->get<std::string>();
  }
  return out;
}

}  // namespace golinear
