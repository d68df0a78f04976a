// Log-likelihood of continuations, as lm-evaluation-harness's HFLM computes it:
//   - tokenization split (_encode_pair): trailing whitespace of the context moves to the front of
//     the continuation; whole = tok(ctx + cont), ctx_ids = tok(ctx), cont_ids = whole[len(ctx_ids):],
//     both with the tokenizer's special tokens (BOS for Llama-3), as lm-eval ≥ 0.4.9.2, or
//     without (older releases: the `add_special = false` legacy convention). An empty context is
//     replaced by the prefix token (BOS, else EOS) and the continuation tokenized alone.
//   - the model reads (ctx_ids + cont_ids)[-(max_length + 1):][:-1]; ll = Σ log p(cont token),
//     is_greedy = every continuation token is the argmax of its row (first index on ties).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "eval/likelihood_tasks.h"
#include "model/transformer.h"
#include "runtime/sequence_slots.h"
#include "tokenizer/tokenizer.h"

namespace golinear::eval {

struct TokenizedRequest {
  std::vector<int32_t> context_ids;
  std::vector<int32_t> continuation_ids;
};

struct TokenizeOptions {
  bool add_special = true;  // false: the pre-0.4.9.2 convention (no BOS)
  int prefix_token_id = 0;  // context of an empty-context request (BOS, else EOS)
};

TokenizedRequest request_tokenize(const Tokenizer& tokenizer, const LikelihoodRequest& request,
                                  const TokenizeOptions& options);

struct LoglikelihoodResult {
  double ll = 0;           // summed log-prob of the continuation tokens
  bool is_greedy = false;  // every continuation token is the argmax
};

// From the logit rows that predict the continuation: rows (n, V), row j predicts
// continuation[j].
LoglikelihoodResult continuation_loglikelihood(const float* rows, int V,
                                               const std::vector<int32_t>& continuation);

// Scores the requests of one document. Requests whose model input is a prefix of another's
// (e.g. MMLU's one-token answers " A".." D" after one shared context) share that forward;
// only the logit rows of continuations are computed (the rest of the input goes through the
// per-sequence cache with last-row logits). Inputs longer than max_length are cut on the left
// as lm-eval does; a continuation of max_length tokens or more is an error.
//
// With `share_prefix`, the remaining forwards of requests with one context (e.g. the choices of
// a multiple-choice question) also share that context: all of it but its last token runs once
// into a per-sequence cache, and each forward continues from a clone of that cache
// (SequenceCache::clone; cheap for the constant-memory cache of a linearized model) with the
// last context token and its continuation. Every forward makes exactly the calls it makes
// without sharing, so the results are bit-identical. Requests whose contexts differ (winogrande)
// and documents with a left-truncated input are scored without prefix sharing.
Result<std::vector<LoglikelihoodResult>> loglikelihood_score_requests(
    const Model& model, const std::vector<TokenizedRequest>& requests, int max_length,
    bool share_prefix = true);

// One model input of a RowsForward pass: T tokens read from position 0, the logit rows
// [first_row, T) wanted.
struct RowsInput {
  const int32_t* ids = nullptr;
  int T = 0;
  int first_row = 0;
};
// The forward of a pass of inputs, each as if alone: rows (Σ (T − first_row), V), input i's rows
// after those of the inputs before it. The forward of another device (the GPU model's packs
// several inputs into one forward), or of the CPU model (cpu_rows_forward).
using RowsForward = std::function<Status(const std::vector<RowsInput>& inputs, float* rows)>;

// Each input on the CPU model alone: its first first_row tokens through a new per-sequence cache
// (last row only), then the rest with every row: the calls of loglikelihood_score_requests
// without prefix sharing, so the same results to the bit. `model` must outlive it.
RowsForward cpu_rows_forward(const Model& model);

// How many inputs one RowsForward call gets: passes of at most max_tokens input tokens and
// max_rows logit rows (an input larger than either goes alone).
struct RowsPassLimits {
  long max_tokens = runtime::kPackedForwardTokens;
  long max_rows = 512;
};

// The requests of several documents (the groups of loglikelihood_score_requests, each document's
// own), their inputs packed into passes of `forward` under `limits` in document order; results
// [d][r] of request r of document d. Errors name the document as first_document + d.
Result<std::vector<std::vector<LoglikelihoodResult>>> loglikelihood_score_documents(
    const RowsForward& forward, int vocab_size,
    const std::vector<std::vector<TokenizedRequest>>& documents, int max_length,
    const RowsPassLimits& limits = {}, long first_document = 0);

// One document's requests through `forward` (a pass per group).
Result<std::vector<LoglikelihoodResult>> loglikelihood_score_requests(
    const RowsForward& forward, int vocab_size, const std::vector<TokenizedRequest>& requests,
    int max_length);

}  // namespace golinear::eval
