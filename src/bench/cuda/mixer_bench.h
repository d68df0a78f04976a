// The mixer table of ANCHORS.md measured on the GPU: prefill forward, forward + backward, decode
// step and cache bytes per layer, for full attention, Gated DeltaNet and the hybrid mixer.
// Median of `repeats` timed calls after `warmups`, CUDA events. Used by `golinear bench` and by
// the standalone bench/cuda/golinear_bench_cuda (same code, for the GPU machine's build), which
// parse the command line into MixerBenchOptions.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "kernels/cuda/gated_delta.h"
#include "mixers/mixer_factory.h"

namespace golinear::bench::cuda {

struct MixerBenchOptions {
  int C = 4096, H = 32, G = 8, D = 128;  // Llama-3.1-8B attention shapes
  int sinks = 8, window = 56;
  mixers::MixKind mix = mixers::MixerOptions{}.mix;  // the hybrid row's mixing (default recipe's)
  std::vector<int> seq_lens = {2048, 4096, 8192, 16384, 32768};
  std::vector<long> contexts = {4096, 32768, 131072, 1048576};
  int warmups = 3, repeats = 10;
  int value_block = 0;  // gdn state-pass columns per block (0: default)
  kernels::cuda::GatedDeltaForwardOptions gdn;  // the GDN row's schedule (segments, persistent)
  bool json = false;
  bool backward = true;
};

// Runs the benchmark on the current device; returns the printed table (or JSON).
Result<std::string> mixer_bench_run(const MixerBenchOptions& options);

}  // namespace golinear::bench::cuda
