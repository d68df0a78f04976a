// Running the synthetic long-context tasks: greedy generation from each prompt, RULER's
// postprocessing and string_match_all. synthetic_report() is the aggregation alone.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "eval/report.h"
#include "runtime/generate.h"
#include "eval/synthetic_tasks.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"

namespace golinear::eval {

// Sequences (a prefill, then one token per step) come from runtime/generate.h: the CPU model's
// (runtime::cpu_sequences) or the GPU's (runtime/cuda/gpu_sequences.h).
using runtime::NewSequence;
using runtime::SequenceStep;

// Greedy decoding through the per-sequence cache (constant memory on linearized models):
// at most max_new_tokens new tokens, ending after one of stop_ids (which is kept in the output).
Result<std::vector<int32_t>> greedy_generate(const NewSequence& new_sequence, int vocab_size,
                                             const std::vector<int32_t>& prompt,
                                             int max_new_tokens, const std::vector<int>& stop_ids);
// The same on the CPU model.
std::vector<int32_t> greedy_generate(const Model& model, const std::vector<int32_t>& prompt,
                                     int max_new_tokens, const std::vector<int>& stop_ids);

struct GenerationEvalOptions {
  bool add_special = true;  // BOS before the prompt when the tokenizer has one
  bool show_progress = false;
  long max_tokens = 0;      // prompt + generated at most (model/context_limit.h); 0: max_position_embeddings
};

// Rows: string_match_all (× 100) per task, per needle depth for single-needle tasks
// ("niah_single_1@depth=50"), and "ruler" (mean over tasks) when there are several tasks.
// Samples: {"index","task","generation","score","references"} (+ "depth").
TaskReport synthetic_report(const std::string& name, const std::vector<SyntheticSample>& samples,
                            const std::vector<std::string>& generations);

// Greedy generation from each sample with sequences of new_sequence; `config` gives the vocabulary
// and the stop tokens (EOS), options.max_tokens the longest sequence.
Result<TaskReport> synthetic_evaluate(const NewSequence& new_sequence, const ModelConfig& config,
                                      const Tokenizer& tokenizer, const std::string& name,
                                      const std::vector<SyntheticSample>& samples,
                                      const GenerationEvalOptions& options);
// The same on the CPU model.
Result<TaskReport> synthetic_evaluate(const Model& model, const Tokenizer& tokenizer,
                                      const std::string& name,
                                      const std::vector<SyntheticSample>& samples,
                                      const GenerationEvalOptions& options);

// Slots for batched generation: `slots` sequences of at most max_context tokens each
// (runtime::CpuSequenceSlots, runtime::cuda::GpuSequenceSlots::create).
using NewSlots = std::function<Result<std::unique_ptr<runtime::SequenceSlots>>(int slots,
                                                                               long max_context)>;

// The same, `batch` samples at a time (runtime::generate_batch: continuous batching over
// min(batch, samples) slots of new_slots, sized for the longest prompt + budget). On the CPU the
// report is the one-at-a-time one (each decode row is its sequence's alone); on the GPU a
// near-tie may go the other way with the batch (gpu_decode_batch).
Result<TaskReport> synthetic_evaluate(const NewSlots& new_slots, int batch,
                                      const ModelConfig& config, const Tokenizer& tokenizer,
                                      const std::string& name,
                                      const std::vector<SyntheticSample>& samples,
                                      const GenerationEvalOptions& options);

}  // namespace golinear::eval
