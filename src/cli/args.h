// Command-line parsing shared by the commands: each command declares its options, anything else
// is refused with one line naming the option.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/result.h"

namespace golinear::cli {

struct OptionSpec {
  std::string name;   // without the leading "--"
  bool takes_value;   // "--name VALUE" (or "--name=VALUE") against a plain flag
};

class Args {
 public:
  static Result<Args> parse(const std::string& command, const std::vector<std::string>& argv,
                            const std::vector<OptionSpec>& options, int min_positional,
                            int max_positional);

  const std::vector<std::string>& positional() const { return positional_; }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  Result<long> get_int(const std::string& name, long fallback, long min_value, long max_value) const;
  Result<double> get_double(const std::string& name, double fallback, double min_value,
                            double max_value) const;
  // The comma-separated integers of option `name` ("8,16,8"), each in [min_value, max_value]; an
  // absent option gives an empty list, an empty item or list is refused.
  Result<std::vector<long>> get_int_list(const std::string& name, long min_value,
                                         long max_value) const;

 private:
  std::string command_;
  std::vector<std::string> positional_;
  std::map<std::string, std::string> values_;
};

// The directory of the bundled default model (models/tiny-llama3-25m of the source tree).
std::string default_model_dir();

}  // namespace golinear::cli
