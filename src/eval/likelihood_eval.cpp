#include "eval/likelihood_eval.h"

#include <cmath>
#include <map>

#include "common/progress.h"
#include "eval/scoring.h"

namespace golinear::eval {

namespace {

MetricRow metric_of(const std::string& task, const std::string& metric,
                    const std::vector<double>& values) {
  return {task, metric, mean_of(values), mean_stderr(values), (long)values.size()};
}

}  // namespace

TaskReport likelihood_report(LikelihoodTask task, const std::vector<LikelihoodDocument>& docs,
                             const std::vector<std::vector<LoglikelihoodResult>>& results) {
  const std::string name = likelihood_task_name(task);
  TaskReport report;
  report.task = name;
  std::vector<double> acc, acc_norm, target_lls;
  std::map<std::string, std::vector<double>> acc_by_subject;
  for (size_t d = 0; d < docs.size(); ++d) {
    const LikelihoodDocument& doc = docs[d];
    std::vector<double> lls;
    std::vector<bool> greedy;
    std::vector<long> lengths;
    for (size_t c = 0; c < results[d].size(); ++c) {
      lls.push_back(results[d][c].ll);
      greedy.push_back(results[d][c].is_greedy);
      lengths.push_back(utf8_length(doc.choices[c]));
    }
    Json sample = {{"index", d}, {"lls", lls}, {"is_greedy", greedy}};
    if (task == LikelihoodTask::lambada) {
      target_lls.push_back(lls[0]);
      acc.push_back(greedy[0] ? 1.0 : 0.0);
      sample["pred"] = 0;
      sample["correct"] = (bool)greedy[0];
    } else {
      const MultipleChoiceScore score = score_multiple_choice(lls, lengths, doc.label);
      acc.push_back(score.acc);
      acc_norm.push_back(score.acc_norm);
      sample["pred"] = score.pred;
      sample["correct"] = score.acc == 1.0;
      sample["label"] = doc.label;
      if (task != LikelihoodTask::winogrande && task != LikelihoodTask::mmlu)
        sample["pred_norm"] = score.pred_norm;
      if (task == LikelihoodTask::mmlu) {
        sample["subject"] = doc.subject;
        acc_by_subject[doc.subject].push_back(score.acc);
      }
    }
    report.samples.push_back(std::move(sample));
  }
  switch (task) {
    case LikelihoodTask::lambada:
      report.metrics.push_back({name, "perplexity", lambada_perplexity(target_lls),
                                lambada_perplexity_stderr(target_lls), (long)target_lls.size()});
      report.metrics.push_back(metric_of(name, "acc", acc));
      break;
    case LikelihoodTask::piqa:
    case LikelihoodTask::arc_easy:
    case LikelihoodTask::arc_challenge:
    case LikelihoodTask::hellaswag:
      report.metrics.push_back(metric_of(name, "acc", acc));
      report.metrics.push_back(metric_of(name, "acc_norm", acc_norm));
      break;
    case LikelihoodTask::winogrande: report.metrics.push_back(metric_of(name, "acc", acc)); break;
    case LikelihoodTask::mmlu: {
      std::vector<double> stderrs, subject_means;
      std::vector<long> sizes;
      std::vector<MetricRow> subject_rows;
      double squares = 0;
      for (const auto& [subject, values] : acc_by_subject) {
        subject_rows.push_back(metric_of("mmlu_" + subject, "acc", values));
        stderrs.push_back(subject_rows.back().stderr_value);
        sizes.push_back((long)values.size());
        subject_means.push_back(subject_rows.back().value);
        squares += stderrs.back() * stderrs.back();
      }
      const double k = (double)subject_means.size();
      report.metrics.push_back({name, "acc", mean_of(acc), pooled_sample_stderr(stderrs, sizes),
                                (long)acc.size()});
      report.metrics.push_back({name, "acc_subject_mean", mean_of(subject_means),
                                std::sqrt(squares) / k, (long)subject_means.size()});
      for (MetricRow& row : subject_rows) report.metrics.push_back(std::move(row));
      break;
    }
  }
  return report;
}

Result<TaskReport> likelihood_evaluate(const DocumentsScorer& score, const Tokenizer& tokenizer,
                                       LikelihoodTask task,
                                       const std::vector<LikelihoodDocument>& docs,
                                       const LikelihoodEvalOptions& options) {
  std::vector<std::vector<LoglikelihoodResult>> results(docs.size());
  ProgressBar bar(likelihood_task_name(task), (long)docs.size(), "req");
  long requests_done = 0;
  const size_t batch = std::max(1, options.batch);
  for (size_t d0 = 0; d0 < docs.size(); d0 += batch) {
    const size_t d1 = std::min(docs.size(), d0 + batch);
    // The batch's documents tokenized in parallel (the tokenizer's state is immutable): a GPU
    // scores faster than one core tokenizes 5-shot prompts.
    std::vector<std::vector<TokenizedRequest>> requests(d1 - d0);
#pragma omp parallel for schedule(dynamic) if (d1 - d0 > 1)
    for (size_t d = d0; d < d1; ++d)
      for (const LikelihoodRequest& request : docs[d].requests)
        requests[d - d0].push_back(request_tokenize(tokenizer, request, options.tokenize));
    for (const auto& document : requests) requests_done += (long)document.size();
    auto scored = score(requests, options.max_length, (long)d0);
    if (!scored.ok()) return make_error(likelihood_task_name(task), " ", scored.error());
    for (size_t d = d0; d < d1; ++d) results[d] = std::move((*scored)[d - d0]);
    if (options.show_progress) bar.update((long)d1, (double)requests_done);
  }
  if (options.show_progress) bar.finish();
  TaskReport report = likelihood_report(task, docs, results);
  report.config = {{"add_special_tokens", options.tokenize.add_special},
                   {"max_length", options.max_length}};
  return report;
}

DocumentsScorer cpu_documents_scorer(const Model& model) {
  return [&model](const std::vector<std::vector<TokenizedRequest>>& documents, int max_length,
                  long first_document) -> Result<std::vector<std::vector<LoglikelihoodResult>>> {
    std::vector<std::vector<LoglikelihoodResult>> results;
    for (size_t d = 0; d < documents.size(); ++d) {
      auto scored = loglikelihood_score_requests(model, documents[d], max_length);
      if (!scored.ok()) return make_error("document ", first_document + (long)d, ": ", scored.error());
      results.push_back(std::move(*scored));
    }
    return results;
  };
}

DocumentsScorer rows_documents_scorer(RowsForward forward, int vocab_size,
                                      const RowsPassLimits& limits) {
  return [forward = std::move(forward), vocab_size, limits](
             const std::vector<std::vector<TokenizedRequest>>& documents, int max_length,
             long first_document) {
    return loglikelihood_score_documents(forward, vocab_size, documents, max_length, limits,
                                         first_document);
  };
}

Result<TaskReport> likelihood_evaluate(const Model& model, const Tokenizer& tokenizer,
                                       LikelihoodTask task,
                                       const std::vector<LikelihoodDocument>& docs,
                                       const LikelihoodEvalOptions& options) {
  return likelihood_evaluate(cpu_documents_scorer(model), tokenizer, task, docs, options);
}

}  // namespace golinear::eval
