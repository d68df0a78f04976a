// JSON through nlohmann::json, with helpers that turn a missing or mistyped field into an Error
// naming the file and the field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/result.h"

namespace golinear {

using Json = nlohmann::json;

// Parses `text`; `what` names the source in the error ("config.json", "line 3 of data.jsonl").
Result<Json> json_parse(const std::string& text, const std::string& what);
Result<Json> json_read_file(const std::string& path);

// Field access with clear errors: json_get<int>(obj, "hidden_size", "config.json").
template <class T>
Result<T> json_get(const Json& object, const std::string& key, const std::string& what) {
  if (!object.is_object()) return make_error(what, ": expected a JSON object");
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return make_error(what, ": missing field '", key, "'");
  try {
    return it->template get<T>();
  } catch (const std::exception&) {
    return make_error(what, ": field '", key, "' has the wrong type (", it->type_name(), ")");
  }
}

template <class T>
Result<T> json_get_or(const Json& object, const std::string& key, T fallback,
                      const std::string& what) {
  if (!object.is_object()) return make_error(what, ": expected a JSON object");
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  return json_get<T>(object, key, what);
}

}  // namespace golinear
