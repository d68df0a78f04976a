#include "common/json.h"

#include "common/file.h"

namespace golinear {

Result<Json> json_parse(const std::string& text, const std::string& what) {
  Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    // Re-parse with exceptions only to obtain the position of the fault for the message.
    try {
      Json reparsed = Json::parse(text);  // throws with the position of the fault
      (void)reparsed;
    } catch (const Json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
      return make_error(what, ": malformed JSON (", e.what(), ")");
    }
    return make_error(what, ": malformed JSON");
  }
  return parsed;
}

Result<Json> json_read_file(const std::string& path) {
  GL_ASSIGN_OR_RETURN(std::string text, file_read_text(path));
  return json_parse(text, path);
}

}  // namespace golinear
