#include <cstdio>

#include "cli/commands.h"

namespace golinear::cli {

int fail(const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "golinear: %s\n", message.c_str());
  return 1;
}

}  // namespace golinear::cli
