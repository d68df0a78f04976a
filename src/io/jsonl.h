// JSON Lines input: one JSON value per non-empty line; errors name the file and the line.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"

namespace golinear {

// Reads every line of `path` ("-" for standard input).
Result<std::vector<Json>> jsonl_read(const std::string& path);

}  // namespace golinear
