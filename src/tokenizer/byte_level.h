// GPT-2 byte-level helpers: the byte <-> printable-character map that byte-level BPE vocabularies
// are written in, and the UTF-8 utilities that encode/decode need around it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace golinear::tokenizer {

// Maps every byte of `bytes` to its GPT-2 character ("Hello world" -> "HelloĠworld"), as the
// ByteLevel pre-tokenizer does before the BPE model sees a word.
std::string byte_level_encode(std::string_view bytes);

// Inverse map of one token's text. Returns nullopt when a character is not in the map; the HF
// ByteLevel decoder then keeps the token's own UTF-8 bytes (this happens for added tokens).
std::optional<std::string> byte_level_decode(std::string_view token);

// Length in bytes of the UTF-8 sequence at the start of `text` if it is a valid scalar value,
// else 0 (invalid or truncated).
size_t utf8_valid_sequence_length(std::string_view text);

// Replaces every invalid UTF-8 sequence by U+FFFD exactly as Rust's String::from_utf8_lossy
// (one replacement per maximal invalid subpart), which is what HF decode returns.
std::string utf8_repair(std::string_view bytes);

// Length of the longest prefix of `bytes` that does not end inside a UTF-8 sequence that could
// still be completed by more bytes. Used to stream decoded bytes without splitting a character.
size_t utf8_complete_prefix_length(std::string_view bytes);

// Appends the UTF-8 encoding of `code_point` to `out`.
void utf8_append(char32_t code_point, std::string* out);

}  // namespace golinear::tokenizer
