// Autoregressive generation through the per-sequence cache: the prompt is prefilled in one
// call, then one token per step.
#pragma once

#include <functional>
#include <vector>

#include "model/transformer.h"
#include "runtime/sampler.h"

namespace golinear::runtime {

struct GenerateOptions {
  int max_new_tokens = 64;
  SamplerOptions sampler;
  std::vector<int> stop_ids;  // generation ends after emitting one of these
};

// Calls on_token(id) for each new token as it is chosen; returns the new tokens.
std::vector<int32_t> generate(const Model& model, const std::vector<int32_t>& prompt,
                              const GenerateOptions& options,
                              const std::function<void(int32_t)>& on_token = {});

}  // namespace golinear::runtime
