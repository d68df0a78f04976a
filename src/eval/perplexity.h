// Perplexity of a model on documents, as `golinear eval ppl` reports it: documents tokenized
// without special tokens, each followed by EOS, concatenated, cut into non-overlapping windows of
// seq_len − 1 tokens, each window preceded by BOS; perplexity = exp(mean NLL over every predicted
// token (the window's tokens, each given BOS and what precedes it in the window)).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/transformer.h"
#include "tokenizer/tokenizer.h"

namespace golinear::eval {

struct PerplexityResult {
  double ppl = 0;
  double mean_nll = 0;
  long tokens = 0;   // predicted tokens
  long windows = 0;
};

// The token stream of `documents`: each tokenized without special tokens, followed by EOS.
std::vector<int32_t> eval_token_stream(const std::vector<std::string>& documents,
                                       const Tokenizer& tokenizer, int eos_id);

// logits (T, V) of T tokens from position 0: the CPU model (model_forward) or another device.
using LogitsForward = std::function<Status(const int32_t* ids, int T, float* logits)>;

Result<PerplexityResult> perplexity(const LogitsForward& forward, int vocab_size,
                                    const std::vector<int32_t>& stream, int bos_id, int seq_len,
                                    bool show_progress = false);
// The same with the CPU model.
Result<PerplexityResult> perplexity(const Model& model, const std::vector<int32_t>& stream,
                                    int bos_id, int seq_len, bool show_progress = false);

}  // namespace golinear::eval
