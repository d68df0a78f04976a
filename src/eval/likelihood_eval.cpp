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

Result<TaskReport> likelihood_evaluate(const RequestScorer& score, const Tokenizer& tokenizer,
                                       LikelihoodTask task,
                                       const std::vector<LikelihoodDocument>& docs,
                                       const LikelihoodEvalOptions& options) {
  std::vector<std::vector<LoglikelihoodResult>> results(docs.size());
  ProgressBar bar(likelihood_task_name(task), (long)docs.size(), "req");
  long requests_done = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    std::vector<TokenizedRequest> requests;
    for (const LikelihoodRequest& request : docs[d].requests)
      requests.push_back(request_tokenize(tokenizer, request, options.tokenize));
    auto scored = score(requests, options.max_length);
    if (!scored.ok()) return make_error(likelihood_task_name(task), " document ", d, ": ", scored.error());
    results[d] = std::move(*scored);
    requests_done += (long)requests.size();
    const bool step_end = (d + 1) % std::max(1, options.batch) == 0 || d + 1 == docs.size();
    if (options.show_progress && step_end) bar.update((long)d + 1, (double)requests_done);
  }
  if (options.show_progress) bar.finish();
  TaskReport report = likelihood_report(task, docs, results);
  report.config = {{"add_special_tokens", options.tokenize.add_special},
                   {"max_length", options.max_length}};
  return report;
}

Result<TaskReport> likelihood_evaluate(const Model& model, const Tokenizer& tokenizer,
                                       LikelihoodTask task,
                                       const std::vector<LikelihoodDocument>& docs,
                                       const LikelihoodEvalOptions& options) {
  const RequestScorer score = [&model](const std::vector<TokenizedRequest>& requests, int max_length) {
    return loglikelihood_score_requests(model, requests, max_length);
  };
  return likelihood_evaluate(score, tokenizer, task, docs, options);
}

}  // namespace golinear::eval
