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

// Prints "golinear: <message>" on stderr and returns 1: the one way a command reports failure.
int fail(const std::string& message);

}  // namespace golinear::cli
