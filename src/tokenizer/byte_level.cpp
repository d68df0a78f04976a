#include "tokenizer/byte_level.h"

#include <array>
#include <unordered_map>

namespace golinear::tokenizer {
namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') map to
// themselves, the other 68 bytes to U+0100, U+0101, ... in byte order.
struct ByteLevelTables {
  std::array<std::string, 256> byte_to_text;           // byte -> UTF-8 of its character
  std::unordered_map<char32_t, uint8_t> char_to_byte;  // character -> byte
};

const ByteLevelTables& byte_level_tables() {
  static const ByteLevelTables tables = [] {
    ByteLevelTables t;
    char32_t next_extra = 256;
    for (int byte = 0; byte < 256; ++byte) {
      bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
                       (byte >= 0xAE && byte <= 0xFF);
      char32_t code_point = printable ? static_cast<char32_t>(byte) : next_extra++;
      utf8_append(code_point, &t.byte_to_text[byte]);
      t.char_to_byte[code_point] = static_cast<uint8_t>(byte);
    }
    return t;
  }();
  return tables;
}

bool is_continuation(uint8_t byte) { return (byte & 0xC0) == 0x80; }

// Number of bytes of the well-formed prefix of the sequence starting at `text[0]` (Unicode
// Table 3-7), and the length the sequence would need. valid == needed means a complete scalar.
struct SequenceCheck {
  size_t valid;
  size_t needed;
};

SequenceCheck utf8_check_sequence(std::string_view text) {
  uint8_t lead = static_cast<uint8_t>(text[0]);
  if (lead < 0x80) return {1, 1};
  size_t needed = 0;
  uint8_t second_low = 0x80, second_high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    needed = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    needed = 3;
    if (lead == 0xE0) second_low = 0xA0;   // no overlong forms
    if (lead == 0xED) second_high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    needed = 4;
    if (lead == 0xF0) second_low = 0x90;   // no overlong forms
    if (lead == 0xF4) second_high = 0x8F;  // nothing above U+10FFFF
  } else {
    return {0, 1};
  }
  size_t valid = 1;
  for (size_t i = 1; i < needed && i < text.size(); ++i) {
    uint8_t byte = static_cast<uint8_t>(text[i]);
    bool ok = i == 1 ? (byte >= second_low && byte <= second_high) : is_continuation(byte);
    if (!ok) break;
    ++valid;
  }
  return {valid, needed};
}

char32_t utf8_decode_valid(std::string_view text, size_t length) {
  auto byte = [&](size_t i) { return static_cast<char32_t>(static_cast<uint8_t>(text[i])); };
  switch (length) {
    case 1:
      return byte(0);
    case 2:
      return ((byte(0) & 0x1F) << 6) | (byte(1) & 0x3F);
    case 3:
      return ((byte(0) & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
    default:
      return ((byte(0) & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) |
             (byte(3) & 0x3F);
  }
}

}  // namespace

void utf8_append(char32_t code_point, std::string* out) {
  if (code_point < 0x80) {
    out->push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

size_t utf8_valid_sequence_length(std::string_view text) {
  if (text.empty()) return 0;
  SequenceCheck check = utf8_check_sequence(text);
  return check.valid == check.needed ? check.valid : 0;
}

std::string byte_level_encode(std::string_view bytes) {
  const auto& table = byte_level_tables().byte_to_text;
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += table[static_cast<uint8_t>(c)];
  return out;
}

std::optional<std::string> byte_level_decode(std::string_view token) {
  const auto& char_to_byte = byte_level_tables().char_to_byte;
  std::string out;
  out.reserve(token.size());
  size_t i = 0;
  while (i < token.size()) {
    size_t length = utf8_valid_sequence_length(token.substr(i));
    if (length == 0) return std::nullopt;
    auto it = char_to_byte.find(utf8_decode_valid(token.substr(i), length));
    if (it == char_to_byte.end()) return std::nullopt;
    out.push_back(static_cast<char>(it->second));
    i += length;
  }
  return out;
}

std::string utf8_repair(std::string_view bytes) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    SequenceCheck check = utf8_check_sequence(bytes.substr(i));
    if (check.valid == check.needed) {
      out.append(bytes.substr(i, check.valid));
      i += check.valid;
    } else {
      // A maximal invalid subpart (at least the lead byte) becomes one replacement character.
      out.append(kReplacement);
      i += check.valid == 0 ? 1 : check.valid;
    }
  }
  return out;
}

size_t utf8_complete_prefix_length(std::string_view bytes) {
  // Only the last (at most 3) bytes can start an unfinished sequence.
  size_t start = bytes.size() > 3 ? bytes.size() - 3 : 0;
  for (size_t i = start; i < bytes.size(); ++i) {
    SequenceCheck check = utf8_check_sequence(bytes.substr(i));
    bool truncated = check.valid < check.needed && i + check.valid == bytes.size();
    if (check.valid > 0 && truncated) return i;
  }
  return bytes.size();
}

}  // namespace golinear::tokenizer
