// One function per command (each in its own file, cmd_<name>.cpp): argument parsing and calls
// into the modules, nothing else. Each returns the process exit status.
#pragma once

#include <string>
#include <vector>

namespace golinear::cli {

using Argv = std::vector<std::string>;

int cmd_info(const Argv& argv);
int cmd_tokenize(const Argv& argv);
int cmd_generate(const Argv& argv);
int cmd_score(const Argv& argv);
int cmd_linearize(const Argv& argv);
int cmd_eval(const Argv& argv);
int cmd_bench(const Argv& argv);
int cmd_analyze(const Argv& argv);
int cmd_random_checkpoint(const Argv& argv);
int cmd_serve(const Argv& argv);

// A command of the table (commands.cpp): its usage text is the one source of truth for the
// overview, `golinear NAME --help` and the hint of a usage error.
struct Command {
  const char* name;
  int (*run)(const Argv& argv);
  const char* synopsis;  // its lines of `golinear --help`
  const char* details;   // printed after the synopsis by `golinear NAME --help` (may be empty)
};
const std::vector<Command>& commands();
const Command* command_find(const std::string& name);  // nullptr when unknown
std::string usage_overview();                           // `golinear --help`
std::string usage_of(const Command& command);           // `golinear NAME --help`

// Prints "golinear: <message>" on stderr and returns 1: the one way a command reports failure.
int fail(const std::string& message);

}  // namespace golinear::cli
