// The whole-model benchmark (issue 5 b): prefill throughput, batch-1 decode throughput and GPU
// memory against context length (or, with batches, aggregate decode throughput and memory
// against concurrency: the serving question), for the model with every layer linearized (default hybrid
// recipe, fresh parameters) and for the same model with full attention (KV cache). The model is
// a Hugging Face config.json with random bf16 weights built on the GPU, or a checkpoint
// directory. Used by `golinear bench --config FILE | --model DIR`, which parses the command line
// into ModelBenchOptions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace golinear::bench::cuda {

struct ModelBenchOptions {
  std::string config_path;  // --config FILE.json (random weights), or
  std::string model_dir;    // --model DIR (checkpoint)
  std::vector<long> contexts = {4096, 32768, 131072, 1048576};
  std::vector<std::string> variants = {"hybrid", "full"};
  long full_prefill_max = 131072;  // full-attention prefill beyond this is not run (O(T²))
  long prefill_max = 1L << 20;     // no prefill beyond this for either model
  int warmups = 1, repeats = 3;    // prefill (contexts ≤ 32K; longer ones: one timed run)
  int decode_repeats = 20;         // decode steps timed (median), after 3 warm-ups
  int sinks = 8, window = 56;
  // Non-empty: the concurrency table instead (--batches): aggregate decode throughput of B
  // sequences at context N each, one batched step (gpu_decode_batch) for all of them, for every
  // variant × context × B; a B whose caches do not fit is reported out of memory.
  std::vector<int> batches;
  uint64_t seed = 1;
  bool json = false;
  std::string json_file;  // also write the JSON here (with the markdown on stdout)
};

// Runs it on the current device; returns the markdown table (or JSON).
Result<std::string> model_bench_run(const ModelBenchOptions& options);

}  // namespace golinear::bench::cuda
