// The one error idiom of the library: functions that can fail on bad input return Result<T>
// (a value or an Error whose message names the file, field or tensor at fault). The CLI turns an
// Error into one line on stderr and a non-zero exit. No exceptions cross module boundaries.
#pragma once

#include <sstream>
#include <string>
#include <utility>
#include <variant>

namespace golinear {

struct Error {
  std::string message;
};

// Concatenates anything streamable: str_cat("tensor ", name, " has ", n, " elements").
template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

template <class... Args>
Error make_error(const Args&... args) {
  return Error{str_cat(args...)};
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}
  Result(Error error) : state_(std::move(error)) {}

  bool ok() const { return state_.index() == 0; }
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const std::string& error() const { return std::get<1>(state_).message; }
  Error take_error() && { return std::get<1>(std::move(state_)); }

 private:
  std::variant<T, Error> state_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error.message)), failed_(true) {}

  bool ok() const { return !failed_; }
  const std::string& error() const { return error_; }
  Error take_error() && { return Error{std::move(error_)}; }

 private:
  std::string error_;
  bool failed_ = false;
};

using Status = Result<void>;

inline Status ok_status() { return Status(); }

}  // namespace golinear

#define GOLINEAR_CONCAT_INNER(a, b) a##b
#define GOLINEAR_CONCAT(a, b) GOLINEAR_CONCAT_INNER(a, b)

// Returns the error of `expr` (a Result or Status) from the enclosing function.
#define GL_TRY(expr)                                                  \
  do {                                                                \
    auto&& gl_try_result_ = (expr);                                   \
    if (!gl_try_result_.ok()) return std::move(gl_try_result_).take_error(); \
  } while (0)

// `GL_ASSIGN_OR_RETURN(auto x, f());` binds the value or returns the error.
#define GL_ASSIGN_OR_RETURN(lhs, expr) \
  GL_ASSIGN_OR_RETURN_IMPL(GOLINEAR_CONCAT(gl_result_, __LINE__), lhs, expr)
#define GL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)     \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return std::move(tmp).take_error(); \
  lhs = std::move(tmp).value()
