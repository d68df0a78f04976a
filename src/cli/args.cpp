#include "cli/args.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace golinear::cli {

Result<Args> Args::parse(const std::string& command, const std::vector<std::string>& argv,
                         const std::vector<OptionSpec>& options, int min_positional,
                         int max_positional) {
  Args args;
  args.command_ = command;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& token = argv[i];
    if (token.size() > 2 && token.compare(0, 2, "--") == 0) {
      std::string name = token.substr(2), value;
      bool inline_value = false;
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        inline_value = true;
      }
      const OptionSpec* spec = nullptr;
      for (const auto& o : options)
        if (o.name == name) spec = &o;
      if (!spec) return make_error("golinear ", command, ": unknown option --", name, " (golinear ", command, " --help)");
      if (spec->takes_value && !inline_value) {
        if (i + 1 >= argv.size()) return make_error("golinear ", command, ": option --", name, " needs a value");
        value = argv[++i];
      } else if (!spec->takes_value && inline_value) {
        return make_error("golinear ", command, ": option --", name, " takes no value");
      }
      args.values_[name] = value;
    } else {
      args.positional_.push_back(token);
    }
  }
  if ((int)args.positional_.size() < min_positional)
    return make_error("golinear ", command, ": missing argument (golinear ", command, " --help)");
  if ((int)args.positional_.size() > max_positional)
    return make_error("golinear ", command, ": unexpected argument '",
                      args.positional_[max_positional], "'");
  return args;
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

Result<long> Args::get_int(const std::string& name, long fallback, long min_value,
                           long max_value) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  errno = 0;
  char* end = nullptr;
  long value = std::strtol(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || errno == ERANGE)
    return make_error("golinear ", command_, ": option --", name, " expects an integer, got '",
                      it->second, "'");
  if (value < min_value || value > max_value)
    return make_error("golinear ", command_, ": option --", name, " must be in [", min_value, ", ",
                      max_value, "], got ", value);
  return value;
}

Result<std::vector<long>> Args::get_int_list(const std::string& name, long min_value,
                                             long max_value) const {
  std::vector<long> out;
  auto it = values_.find(name);
  if (it == values_.end()) return out;
  const std::string& text = it->second;
  for (size_t begin = 0; begin <= text.size();) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    errno = 0;
    char* stop = nullptr;
    const long value = std::strtol(item.c_str(), &stop, 10);
    if (item.empty() || *stop != '\0' || errno == ERANGE || value < min_value || value > max_value)
      return make_error("golinear ", command_, ": option --", name, " expects integers in [",
                        min_value, ", ", max_value, "] separated by commas, got '", text, "'");
    out.push_back(value);
    begin = end + 1;
  }
  return out;
}

Result<double> Args::get_double(const std::string& name, double fallback, double min_value,
                                double max_value) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  char* end = nullptr;
  double value = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0')
    return make_error("golinear ", command_, ": option --", name, " expects a number, got '",
                      it->second, "'");
  if (!(value >= min_value && value <= max_value))
    return make_error("golinear ", command_, ": option --", name, " must be in [", min_value, ", ",
                      max_value, "], got ", it->second);
  return value;
}

std::string default_model_dir() { return GOLINEAR_DEFAULT_MODEL_DIR; }

}  // namespace golinear::cli
