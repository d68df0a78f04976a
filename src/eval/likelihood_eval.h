// Running a log-likelihood task on a model: documents → requests → scores → lm-eval's metrics.
// likelihood_report() is the aggregation alone, a pure function of the per-request results.
#pragma once

#include <functional>
#include <vector>

#include "eval/likelihood_tasks.h"
#include "eval/loglikelihood.h"
#include "eval/report.h"

namespace golinear::eval {

struct LikelihoodEvalOptions {
  TokenizeOptions tokenize;
  int max_length = 2048;       // the model's positions (max_position_embeddings)
  int batch = 1;               // documents per scorer call (one GPU pass or more; the CPU's
                               // results do not depend on it)
  bool show_progress = false;  // progress bar on stderr
};

// Metrics per task (lm-eval's task configs):
//   lambada: perplexity = exp(−mean ll) (bootstrap stderr), acc = mean is_greedy;
//   piqa, arc_easy, arc_challenge, hellaswag: acc, acc_norm; winogrande: acc;
//   mmlu: acc weighted by questions (pooled stderr), acc_subject_mean (unweighted mean over
//   subjects, stderr sqrt(Σ se²)/k), and acc per subject ("mmlu_<subject>").
// results[d][r] is request r of document d. Samples: {"index","lls","is_greedy","pred",
// "correct"} (+ "pred_norm", "label", "subject" where they apply).
TaskReport likelihood_report(LikelihoodTask task, const std::vector<LikelihoodDocument>& docs,
                             const std::vector<std::vector<LoglikelihoodResult>>& results);

// Scores the tokenized requests of several documents (results [d][r]): the CPU model's
// loglikelihood_score_requests per document, or loglikelihood_score_documents with the forward
// of another device. Errors name the document as first_document + d.
using DocumentsScorer = std::function<Result<std::vector<std::vector<LoglikelihoodResult>>>(
    const std::vector<std::vector<TokenizedRequest>>& documents, int max_length,
    long first_document)>;

// The CPU model's scorer (each document's requests with shared prefixes through the cache) and
// a RowsForward's (documents packed into passes under `limits`).
DocumentsScorer cpu_documents_scorer(const Model& model);
DocumentsScorer rows_documents_scorer(RowsForward forward, int vocab_size,
                                      const RowsPassLimits& limits = {});

Result<TaskReport> likelihood_evaluate(const DocumentsScorer& score, const Tokenizer& tokenizer,
                                       LikelihoodTask task,
                                       const std::vector<LikelihoodDocument>& docs,
                                       const LikelihoodEvalOptions& options);
// The same on the CPU model.
Result<TaskReport> likelihood_evaluate(const Model& model, const Tokenizer& tokenizer,
                                       LikelihoodTask task,
                                       const std::vector<LikelihoodDocument>& docs,
                                       const LikelihoodEvalOptions& options);

}  // namespace golinear::eval
