// Standalone front end of the mixer benchmark, for builds without the CLI's dependencies (the GPU
// machine's -DGOLINEAR_DEVICE_BUILD=ON). Same options and output as `golinear bench`.
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cuda/mixer_bench.h"

int main(int argc, char** argv) {
  using namespace golinear::kernels::cuda;
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto options = mixer_bench_parse(args);
  if (!options.ok()) {
    std::fprintf(stderr, "golinear_bench_cuda: %s\n", options.error().c_str());
    return 1;
  }
  auto table = mixer_bench_run(*options);
  if (!table.ok()) {
    std::fprintf(stderr, "golinear_bench_cuda: %s\n", table.error().c_str());
    return 1;
  }
  std::fputs(table->c_str(), stdout);
  return 0;
}
