// The training target of issue 5, measured: attention transfer of a model of a Hugging Face
// config's shape (e.g. bench/configs/llama-3.1-8b.json) with random bf16 weights built on the GPU
// (model/cuda/gpu_model.h) and random tokens, every layer a fresh default-recipe hybrid mixer,
// trained by gpu_attention_transfer exactly as `golinear linearize --device cuda` trains.
#pragma once

#include <cstdint>
#include <string>

#include "common/json.h"
#include "common/result.h"

namespace golinear::bench::cuda {

struct TransferBenchOptions {
  std::string config_path;  // config.json of the shape
  int seq_len = 4096;
  int batch = 1;
  long steps = 20;          // timed steps
  int sinks = 8, window = 56;
  uint64_t seed = 0;
  bool profile = false;          // the trainer's per-stage table on stderr (TrainOptions::profile)
  bool pipeline_teacher = true;  // TrainOptions::pipeline_teacher
};

// {"config", "seq_len", "batch", "steps", "tokens", "tokens_per_s" (the trainer's own rate),
//  "wall_s" (setup included), "new_params", "final_nmse", "minutes_per_10m_tokens"}.
Result<Json> gpu_transfer_bench(const TransferBenchOptions& options);

}  // namespace golinear::bench::cuda
