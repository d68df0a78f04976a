// The transformer of model/transformer.h on one GPU: bf16 weights, fp32 accumulation, the same
// families (Llama-3.x, Qwen2, Qwen3) and the same mixers per layer (softmax attention, or the
// default hybrid recipe: gdn state, gate mix, conv). model/transformer.h is the specification;
// tests/model/cuda/ compares the two.
//
// INTERFACE CONTRACT (written before the implementation; the GPU trainer in train/cuda codes
// against gpu_model_trace, so change it only together with its callers).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/result.h"
#include "kernels/cuda/cuda_common.h"
#include "model/transformer.h"

namespace golinear::cuda {

using kernels::cuda::bf16;

class GpuModel;

// Uploads `model` (its config, weights and mixers) to the current GPU as bf16.
Result<std::unique_ptr<GpuModel>> gpu_model_upload(const Model& model);

// What the frozen backbone hands the mixer of one layer, and what the teacher's mixer returned,
// for T tokens of one sequence: device pointers, bf16, valid until the next call on the model.
struct GpuLayerTrace {
  const bf16* x = nullptr;  // (T, C) after input_layernorm
  const bf16* q = nullptr;  // (T, H, D) after q_proj (+bias, +q_norm), before RoPE
  const bf16* k = nullptr;  // (T, G, D) after k_proj (+bias, +k_norm), before RoPE
  const bf16* v = nullptr;  // (T, G, D) after v_proj (+bias)
  const bf16* y = nullptr;  // (T, H, D) the layer's mixer output (before o_proj)
};

// Forward of `tokens` (host, T ids, one sequence from position 0) through the model as loaded;
// fills one GpuLayerTrace per layer. The attention-transfer teacher pass.
Status gpu_model_trace(GpuModel& model, const int32_t* tokens, int T,
                       std::vector<GpuLayerTrace>* layers);

}  // namespace golinear::cuda
