// Shared by the harnesses: the parsers read files, so each input goes to a file of this process.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace golinear::fuzz {

// A path of this process under the temporary directory, e.g. golinear_fuzz_123/name.
inline std::string fuzz_path(const std::string& name) {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("golinear_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return (dir / name).string();
}

// Writes `size` bytes to fuzz_path(name) and returns that path.
inline std::string fuzz_write(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = fuzz_path(name);
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace golinear::fuzz
