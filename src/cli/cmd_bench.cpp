// golinear bench: the mixer table of ANCHORS.md on the GPU (kernels/cuda/mixer_bench.h).
#include <cstdio>

#include "cli/commands.h"
#ifdef GOLINEAR_HAVE_CUDA
#include "kernels/cuda/mixer_bench.h"
#endif

namespace golinear::cli {

int cmd_bench(const Argv& argv) {
#ifdef GOLINEAR_HAVE_CUDA
  auto options = kernels::cuda::mixer_bench_parse(argv);
  if (!options.ok()) return fail(options.error());
  auto table = kernels::cuda::mixer_bench_run(*options);
  if (!table.ok()) return fail(table.error());
  std::fputs(table->c_str(), stdout);
  return 0;
#else
  (void)argv;
  return fail("bench needs the CUDA build: this golinear was built without nvcc (GOLINEAR_CUDA=ON "
              "and nvcc on the PATH when configuring)");
#endif
}

}  // namespace golinear::cli
