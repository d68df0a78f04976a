// Reading a dataset file as rows: JSON Lines (one object per line) or a JSON file holding an
// array of objects. Each row keeps a name for error messages ("piqa.jsonl line 3").
#pragma once

#include <string>
#include <vector>

#include "common/json.h"

namespace golinear::eval {

struct TaskRow {
  Json value;
  std::string where;  // "FILE line N" (JSONL) or "FILE row N" (JSON array)
};

Result<std::vector<TaskRow>> task_rows_read(const std::string& path);

}  // namespace golinear::eval
