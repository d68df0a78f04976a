// Standalone front end of the mixer benchmark, for builds without the CLI's dependencies (the GPU
// machine's -DGOLINEAR_DEVICE_BUILD=ON). Same options and output as `golinear bench` (whose
// parser, src/cli/cmd_bench.cpp, needs the CLI's Args).
#include <cstdio>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "bench/cuda/mixer_bench.h"

namespace {

using golinear::Result;
using golinear::bench::cuda::MixerBenchOptions;
using golinear::kernels::cuda::GatedDeltaPersistent;

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

// `--json --seq 2048,4096 --contexts 4096,32768 --repeats N --warmups N --value-block V
// --gdn-segments N --gdn-wait-groups N --gdn-persistent auto|never|always --no-backward
// --heads H --kv-heads G --head-dim D --hidden C`.
Result<MixerBenchOptions> parse(const std::vector<std::string>& argv) {
  MixerBenchOptions o;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    auto value = [&]() -> Result<std::string> {
      if (i + 1 >= argv.size()) return golinear::make_error("bench: ", a, " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--json") o.json = true;
      else if (a == "--no-backward") o.backward = false;
      else if (a == "--seq") { GL_ASSIGN_OR_RETURN(auto v, value()); o.seq_lens.clear(); for (auto& x : split_commas(v)) o.seq_lens.push_back(std::stoi(x)); }
      else if (a == "--contexts") { GL_ASSIGN_OR_RETURN(auto v, value()); o.contexts.clear(); for (auto& x : split_commas(v)) o.contexts.push_back(std::stol(x)); }
      else if (a == "--repeats") { GL_ASSIGN_OR_RETURN(auto v, value()); o.repeats = std::stoi(v); }
      else if (a == "--warmups") { GL_ASSIGN_OR_RETURN(auto v, value()); o.warmups = std::stoi(v); }
      else if (a == "--value-block") { GL_ASSIGN_OR_RETURN(auto v, value()); o.value_block = std::stoi(v); }
      else if (a == "--gdn-segments") { GL_ASSIGN_OR_RETURN(auto v, value()); o.gdn.segments = std::stoi(v); }
      else if (a == "--gdn-wait-groups") { GL_ASSIGN_OR_RETURN(auto v, value()); o.gdn.wait_groups = std::stoi(v); }
      else if (a == "--gdn-persistent") {
        GL_ASSIGN_OR_RETURN(auto v, value());
        if (v == "auto") o.gdn.persistent = GatedDeltaPersistent::automatic;
        else if (v == "never") o.gdn.persistent = GatedDeltaPersistent::never;
        else if (v == "always") o.gdn.persistent = GatedDeltaPersistent::always;
        else return golinear::make_error("bench: --gdn-persistent ", v, " (auto, never, always)");
      }
      else if (a == "--heads") { GL_ASSIGN_OR_RETURN(auto v, value()); o.H = std::stoi(v); }
      else if (a == "--kv-heads") { GL_ASSIGN_OR_RETURN(auto v, value()); o.G = std::stoi(v); }
      else if (a == "--head-dim") { GL_ASSIGN_OR_RETURN(auto v, value()); o.D = std::stoi(v); }
      else if (a == "--hidden") { GL_ASSIGN_OR_RETURN(auto v, value()); o.C = std::stoi(v); }
      else return golinear::make_error("bench: unknown option ", a);
    } catch (const std::exception&) {
      return golinear::make_error("bench: bad number after ", a);
    }
  }
  if (o.repeats < 1 || o.warmups < 0 || o.G < 1 || o.H % o.G != 0 || o.gdn.segments < 0)
    return golinear::make_error(
        "bench: need repeats ≥ 1, warmups ≥ 0, kv heads dividing heads and gdn segments ≥ 0");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto options = parse(args);
  if (!options.ok()) {
    std::fprintf(stderr, "golinear_bench_cuda: %s\n", options.error().c_str());
    return 1;
  }
  auto table = golinear::bench::cuda::mixer_bench_run(*options);
  if (!table.ok()) {
    std::fprintf(stderr, "golinear_bench_cuda: %s\n", table.error().c_str());
    return 1;
  }
  std::fputs(table->c_str(), stdout);
  return 0;
}
