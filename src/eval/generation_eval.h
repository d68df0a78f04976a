// Running the synthetic long-context tasks: greedy generation from each prompt, RULER's
// postprocessing and string_match_all. synthetic_report() is the aggregation alone.
#pragma once

#include <vector>

#include "eval/report.h"
#include "eval/synthetic_tasks.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"

namespace golinear::eval {

// Greedy decoding through the per-sequence cache (constant memory on linearized models):
// at most max_new_tokens new tokens, ending after one of stop_ids (which is kept in the output).
std::vector<int32_t> greedy_generate(const Model& model, const std::vector<int32_t>& prompt,
                                     int max_new_tokens, const std::vector<int>& stop_ids);

struct GenerationEvalOptions {
  bool add_special = true;  // BOS before the prompt when the tokenizer has one
  bool show_progress = false;
};

// Rows: string_match_all (× 100) per task, per needle depth for single-needle tasks
// ("niah_single_1@depth=50"), and "ruler" (mean over tasks) when there are several tasks.
// Samples: {"index","task","generation","score","references"} (+ "depth").
TaskReport synthetic_report(const std::string& name, const std::vector<SyntheticSample>& samples,
                            const std::vector<std::string>& generations);

Result<TaskReport> synthetic_evaluate(const Model& model, const Tokenizer& tokenizer,
                                      const std::string& name,
                                      const std::vector<SyntheticSample>& samples,
                                      const GenerationEvalOptions& options);

}  // namespace golinear::eval
