// How long a sequence a model should be run on, derived from the model rather than a constant.
//
// - A model with any softmax-attention layer (a base checkpoint, or a hybrid that keeps layers
//   full): max_position_embeddings, the positions it was trained on (its KV cache also grows with
//   the context).
// - A model whose every layer is a constant-state mixer (gdn, gla, kgla, hedgehog, none): decode
//   memory does not grow with the context and RoPE is a function of any position, so the bound is
//   the memory of one full forward over the sequence (the prefill of `score`, a window of
//   `eval ppl`): T × context_bytes_per_token ≤ memory_bytes (the caller passes the memory it may
//   use, e.g. the host's physical memory), and at most 2^30 tokens (sizes are int).
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "io/config.h"

namespace golinear {

struct ContextLimit {
  long tokens = 0;
  std::string reason;  // why this bound, for error messages
};

// Bytes one token holds at once in a full forward: fp32 logits (V), the residual stream and the
// projections of a layer (C, q/k/v), the MLP (3F) — a deliberate over-estimate.
long context_bytes_per_token(const ModelConfig& config);

// `layer_mixers`: per layer, "softmax" or a linear mixer's name (linearization.json's "layers");
// empty for a base model.
ContextLimit context_limit(const ModelConfig& config, const std::vector<std::string>& layer_mixers,
                           size_t memory_bytes);

// The same for a model directory (a checkpoint, a linearized checkpoint or an adapter,
// model_directory_resolve): its config.json and, when linearized, linearization.json.
Result<ContextLimit> context_limit_read(const std::string& dir, size_t memory_bytes);

}  // namespace golinear
