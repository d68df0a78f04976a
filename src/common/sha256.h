// SHA-256 (FIPS 180-4) in plain C++: the fingerprint of an adapter's base checkpoint
// (io/checkpoint.h) without a crypto dependency. Not constant-time; for identities, not secrets.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace golinear {

class Sha256 {
 public:
  Sha256();
  // Appends `bytes` bytes to the message.
  void update(const void* data, size_t bytes);
  void update(std::string_view text) { update(text.data(), text.size()); }
  // The digest of everything appended; the object must not be updated afterwards.
  std::array<uint8_t, 32> finish();
  // finish() as 64 lowercase hex digits.
  std::string finish_hex();

 private:
  void compress(const uint8_t* block);  // one 64-byte block into state_
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};    // a partial block
  size_t buffered_ = 0;                 // bytes in buffer_
  uint64_t length_ = 0;                 // message length in bytes
};

// The SHA-256 of `text` as 64 lowercase hex digits.
std::string sha256_hex(std::string_view text);

}  // namespace golinear
