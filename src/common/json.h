// JSON through nlohmann::json, with helpers that turn a missing or mistyped field into an Error
// naming the file and the field.
#pragma once

#include <nlohmann/json.hpp>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

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
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // Integers must be integers in range: 2.9 or 1e30 for a count is an error, not 2 or garbage.
    if (!it->is_number_integer())
      return make_error(what, ": field '", key, "' must be an integer, got ", it->dump());
    const bool in_range = it->is_number_unsigned()
                              ? it->template get<uint64_t>() <= (uint64_t)std::numeric_limits<T>::max()
                              : it->template get<int64_t>() >= (int64_t)std::numeric_limits<T>::min() &&
                                    it->template get<int64_t>() <= (int64_t)std::numeric_limits<T>::max();
    if (!in_range) return make_error(what, ": field '", key, "' is out of range: ", it->dump());
  }
  if constexpr (std::is_same_v<T, std::vector<int32_t>> || std::is_same_v<T, std::vector<int>> ||
                std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::vector<uint64_t>>) {
    using E = typename T::value_type;
    if (!it->is_array()) return make_error(what, ": field '", key, "' must be a list of integers");
    for (const auto& e : *it) {
      const bool ok = e.is_number_integer() &&
                      (e.is_number_unsigned() ? e.template get<uint64_t>() <= (uint64_t)std::numeric_limits<E>::max()
                                              : e.template get<int64_t>() >= (int64_t)std::numeric_limits<E>::min() &&
                                                    e.template get<int64_t>() <= (int64_t)std::numeric_limits<E>::max());
      if (!ok) return make_error(what, ": field '", key, "' must hold integers in range, got ", e.dump());
    }
  }
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
