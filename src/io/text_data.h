// Training and evaluation text: .jsonl (one {"text": ...} per line), .txt (the whole file is one
// document), and either compressed with xz (.jsonl.xz, .txt.xz).
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace golinear {

// Reads the documents of `path`. Errors name the file (and the line, for JSONL).
Result<std::vector<std::string>> text_documents_read(const std::string& path);

// Decompresses a whole .xz file.
Result<std::string> xz_read_file(const std::string& path);

}  // namespace golinear
