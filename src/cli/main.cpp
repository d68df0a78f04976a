#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "cli/commands.h"

static int run_command(int argc, char** argv);

// The library reports errors as Results; anything thrown past a command (out of memory, a
// filesystem error) still ends as one line and a non-zero exit, never as std::terminate.
int main(int argc, char** argv) {
  try {
    return run_command(argc, argv);
  } catch (const std::exception& e) {
    return golinear::cli::fail(std::string("internal error: ") + e.what());
  }
}

static int run_command(int argc, char** argv) {
  using namespace golinear::cli;
  auto is_help = [](const std::string& a) { return a == "--help" || a == "-h"; };
  if (argc < 2 || is_help(argv[1])) {
    std::fputs(usage_overview().c_str(), argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  const Command* command = command_find(name);
  if (!command) return fail("unknown command '" + name + "' (see golinear --help)");
  Argv rest(argv + 2, argv + argc);
  // --help or -h anywhere after the command prints its usage (a value that is literally "-h"
  // goes in as --option=-h).
  if (std::any_of(rest.begin(), rest.end(), is_help)) {
    std::fputs(usage_of(*command).c_str(), stdout);
    return 0;
  }
  return command->run(rest);
}
