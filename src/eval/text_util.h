// Small string helpers shared by the eval tasks.
#pragma once

#include <string>

namespace golinear::eval {

// Every occurrence of `from` (non-empty) in `text` replaced by `to`, left to right.
inline std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  std::string out;
  size_t begin = 0;
  for (size_t at; (at = text.find(from, begin)) != std::string::npos; begin = at + from.size())
    out.append(text, begin, at - begin).append(to);
  return out.append(text, begin, std::string::npos);
}

}  // namespace golinear::eval
