// The mixer table of ANCHORS.md measured on the GPU: prefill forward, forward + backward, decode
// step and cache bytes per layer, for full attention, Gated DeltaNet and the hybrid mixer.
// Median of `repeats` timed calls after `warmups`, CUDA events. Used by `golinear bench` and by
// the standalone bench/cuda/golinear_bench_cuda (same code, for the GPU machine's build).
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace golinear::kernels::cuda {

struct MixerBenchOptions {
  int C = 4096, H = 32, G = 8, D = 128;  // Llama-3.1-8B attention shapes
  int sinks = 8, window = 56;
  std::vector<int> seq_lens = {2048, 4096, 8192, 16384, 32768};
  std::vector<long> contexts = {4096, 32768, 131072, 1048576};
  int warmups = 3, repeats = 10;
  int value_block = 0;  // gdn state-pass columns per block (0: default)
  bool json = false;
  bool backward = true;
};

// Parses `--json --seq 2048,4096 --contexts 4096,32768 --repeats N --warmups N --value-block V
// --no-backward --heads H --kv-heads G --head-dim D --hidden C`.
Result<MixerBenchOptions> mixer_bench_parse(const std::vector<std::string>& argv);

// Runs the benchmark on the current device; returns the printed table (or JSON).
Result<std::string> mixer_bench_run(const MixerBenchOptions& options);

}  // namespace golinear::kernels::cuda
