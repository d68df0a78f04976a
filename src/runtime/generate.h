// Autoregressive generation through a per-sequence cache: the prompt is prefilled in one call,
// then one token per step. The sequence is a parameter (a SequenceStep from a NewSequence), so
// the same loop runs on the CPU model (cpu_sequences) or on the GPU (runtime/cuda/gpu_sequences.h).
#pragma once

#include <functional>
#include <vector>

#include "common/result.h"
#include "model/transformer.h"
#include "runtime/sampler.h"

namespace golinear::runtime {

struct GenerateOptions {
  int max_new_tokens = 64;
  SamplerOptions sampler;
  std::vector<int> stop_ids;  // generation ends after emitting one of these
};

// One sequence's incremental forward: appends T tokens (T ≥ 1) to its cache and writes the
// last one's logits (V floats).
using SequenceStep = std::function<Status(const int32_t* ids, int T, float* last_logits)>;
// A new, empty sequence that will hold at most max_context tokens.
using NewSequence = std::function<Result<SequenceStep>(long max_context)>;

// Sequences of the CPU model (model_forward_cached on a model_new_cache); `model` must outlive
// them.
NewSequence cpu_sequences(const Model& model);

// Calls on_token(id) for each new token as it is chosen; returns the new tokens. The sampler
// runs on the host on the logits the sequence returns (V = vocab_size).
Result<std::vector<int32_t>> generate(const NewSequence& new_sequence, int vocab_size,
                                      const std::vector<int32_t>& prompt,
                                      const GenerateOptions& options,
                                      const std::function<void(int32_t)>& on_token = {});

// The same on the CPU model.
std::vector<int32_t> generate(const Model& model, const std::vector<int32_t>& prompt,
                              const GenerateOptions& options,
                              const std::function<void(int32_t)>& on_token = {});

}  // namespace golinear::runtime
