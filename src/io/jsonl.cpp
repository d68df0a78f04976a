#include "io/jsonl.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

namespace golinear {

Result<std::vector<Json>> jsonl_read(const std::string& path) {
  std::ifstream file;
  if (path != "-") {
    file.open(path);
    if (!file) return make_error(path, ": cannot open (", std::strerror(errno), ")");
  }
  std::istream& in = path == "-" ? std::cin : file;
  const std::string name = path == "-" ? "<stdin>" : path;
  std::vector<Json> rows;
  std::string line;
  for (long number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    GL_ASSIGN_OR_RETURN(Json row, json_parse(line, str_cat(name, ":", number)));
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace golinear
