#include "eval/task_rows.h"

#include "common/file.h"

namespace golinear::eval {

Result<std::vector<TaskRow>> task_rows_read(const std::string& path) {
  GL_ASSIGN_OR_RETURN(std::string text, file_read_text(path));
  std::vector<TaskRow> rows;
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {
    GL_ASSIGN_OR_RETURN(Json array, json_parse(text, path));
    for (size_t i = 0; i < array.size(); ++i)
      rows.push_back({array[i], str_cat(path, " row ", i + 1)});
  } else {
    size_t begin = 0;
    for (long number = 1; begin < text.size(); ++number) {
      size_t end = text.find('\n', begin);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(begin, end - begin);
      begin = end + 1;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string where = str_cat(path, " line ", number);
      GL_ASSIGN_OR_RETURN(Json row, json_parse(line, where));
      if (!row.is_object()) return make_error(where, ": expected a JSON object");
      rows.push_back({std::move(row), where});
    }
  }
  if (rows.empty()) return make_error(path, ": no rows");
  return rows;
}

}  // namespace golinear::eval
