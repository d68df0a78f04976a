// Autoregressive generation through a per-sequence cache: the prompt is prefilled in one call,
// then one token per step. The sequence is a parameter (a SequenceStep from a NewSequence), so
// the same loop runs on the CPU model (cpu_sequences) or on the GPU (runtime/cuda/gpu_sequences.h).
// generate_batch runs many prompts together over the slots of a SequenceSlots.
#pragma once

#include <functional>
#include <vector>

#include "common/result.h"
#include "model/transformer.h"
#include "runtime/sampler.h"
#include "runtime/sequence_slots.h"

namespace golinear::runtime {

struct GenerateOptions {
  int max_new_tokens = 64;
  SamplerOptions sampler = {};
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

// One prompt of a batched run (generate_batch): at most max_new_tokens new tokens, chosen by
// its own sampler (greedy by default).
struct BatchRequest {
  std::vector<int32_t> prompt;
  int max_new_tokens = 64;
  SamplerOptions sampler = {};
};

// Generation of many prompts over the slots of `slots` (continuous batching, as the server's
// scheduler runs requests): the free slots take the next requests (reset, their whole prompts
// prefilled together by SequenceSlots::prefill_batch), then every step decodes all generating
// slots together by one token; a sequence ends after one of stop_ids (kept in its output) or
// max_new_tokens new tokens, and its slot takes the next request at once (the slots freed by one
// step prefilled together). A prefill_batch call takes prompts while it holds fewer than
// max_prefill_tokens tokens, as the scheduler's prefill_chunk (a GPU's packed forward holds the
// activations of all of them); more free slots wait for the next call. on_done(i, tokens) is
// called as request i ends (in the order they end); the result holds each request's new tokens in
// request order. A step whose sequences are all greedy asks only for the argmax rows
// (SequenceSlots::decode_greedy), else each row is sampled on the host by its request's sampler.
// A request's tokens are generate()'s with its sampler on the slots' logits: on the CPU
// (CpuSequenceSlots, model_decode_batch: each row is its sequence's alone) the same tokens bit for
// bit whatever the slots; on the GPU the packed prefill's and the batched step's logits can differ
// in the last bits with the batch (gpu_prefill_batch, gpu_decode_batch), so a near-tie may go the
// other way.
Result<std::vector<std::vector<int32_t>>> generate_batch(
    SequenceSlots& slots, const std::vector<BatchRequest>& requests,
    const std::vector<int>& stop_ids,
    const std::function<void(size_t, const std::vector<int32_t>&)>& on_done = {},
    long max_prefill_tokens = kPackedForwardTokens);

}  // namespace golinear::runtime
