#include "eval/generation_eval.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/progress.h"
#include "eval/scoring.h"

namespace golinear::eval {

Result<std::vector<int32_t>> greedy_generate(const NewSequence& new_sequence, int vocab_size,
                                             const std::vector<int32_t>& prompt,
                                             int max_new_tokens, const std::vector<int>& stop_ids) {
  runtime::GenerateOptions options;  // temperature 0: argmax, first index on ties
  options.max_new_tokens = max_new_tokens;
  options.stop_ids = stop_ids;
  return runtime::generate(new_sequence, vocab_size, prompt, options);
}

std::vector<int32_t> greedy_generate(const Model& model, const std::vector<int32_t>& prompt,
                                     int max_new_tokens, const std::vector<int>& stop_ids) {
  // The CPU sequence cannot fail.
  return greedy_generate(runtime::cpu_sequences(model), model.config.vocab_size, prompt,
                         max_new_tokens, stop_ids)
      .value();
}

namespace {

std::string depth_label(double depth) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", depth);
  return text;
}

}  // namespace

TaskReport synthetic_report(const std::string& name, const std::vector<SyntheticSample>& samples,
                            const std::vector<std::string>& generations) {
  TaskReport report;
  report.task = name;
  std::vector<std::string> task_order;
  std::map<std::string, std::vector<double>> by_task;
  std::map<std::string, std::map<double, std::vector<double>>> by_depth;
  for (size_t i = 0; i < samples.size(); ++i) {
    const SyntheticSample& sample = samples[i];
    const double score = string_match_all(generations[i], sample.references);
    if (!by_task.count(sample.task)) task_order.push_back(sample.task);
    by_task[sample.task].push_back(score);
    Json entry = {{"index", i}, {"task", sample.task}, {"generation", generations[i]},
                  {"score", score}, {"references", sample.references}};
    if (sample.needles.size() == 1 && sample.depths.size() == 1) {
      by_depth[sample.task][sample.depths[0]].push_back(score);
      entry["depth"] = sample.depths[0];
    }
    report.samples.push_back(std::move(entry));
  }
  std::vector<double> task_means;
  double squares = 0;
  for (const std::string& task : task_order) {
    const std::vector<double>& scores = by_task[task];
    report.metrics.push_back({task, "string_match_all", mean_of(scores), mean_stderr(scores),
                              (long)scores.size()});
    task_means.push_back(report.metrics.back().value);
    squares += std::pow(report.metrics.back().stderr_value, 2);
    if (by_depth[task].size() > 1)
      for (const auto& [depth, depth_scores] : by_depth[task])
        report.metrics.push_back({task + "@depth=" + depth_label(depth), "string_match_all",
                                  mean_of(depth_scores), mean_stderr(depth_scores),
                                  (long)depth_scores.size()});
  }
  if (task_order.size() > 1)
    report.metrics.push_back({name, "string_match_all", mean_of(task_means),
                              std::sqrt(squares) / (double)task_means.size(), (long)task_means.size()});
  return report;
}

namespace {

// Each sample's prompt (tokenized) and generation budget, refused when longer than max_tokens.
Result<std::vector<runtime::BatchRequest>> sample_requests(
    const ModelConfig& config, const Tokenizer& tokenizer,
    const std::vector<SyntheticSample>& samples, const GenerationEvalOptions& options) {
  const long max_tokens = options.max_tokens > 0 ? options.max_tokens : config.max_position_embeddings;
  std::vector<runtime::BatchRequest> requests;
  for (const SyntheticSample& sample : samples) {
    runtime::BatchRequest request{tokenizer.encode(sample.prompt, options.add_special),
                                   sample.max_new_tokens};
    if ((long)request.prompt.size() + request.max_new_tokens > max_tokens)
      return make_error(sample.task, ": a prompt of ", request.prompt.size(), " tokens plus ",
                        request.max_new_tokens, " generated exceeds the model's limit of ",
                        max_tokens, " tokens");
    requests.push_back(std::move(request));
  }
  return requests;
}

// Generates every request's tokens, calling on_done(i, tokens) as request i ends.
using OnDone = std::function<void(size_t, const std::vector<int32_t>&)>;
using GenerateAll = std::function<Result<std::vector<std::vector<int32_t>>>(
    const std::vector<runtime::BatchRequest>&, const OnDone&)>;

// The report of the samples' generations (with a progress bar over the samples as they end).
Result<TaskReport> evaluate_with(const GenerateAll& generate_all, const ModelConfig& config,
                                 const Tokenizer& tokenizer, const std::string& name,
                                 const std::vector<SyntheticSample>& samples,
                                 const GenerationEvalOptions& options) {
  GL_ASSIGN_OR_RETURN(const std::vector<runtime::BatchRequest> requests,
                      sample_requests(config, tokenizer, samples, options));
  ProgressBar bar(name, (long)samples.size());
  long done = 0;
  double tokens = 0;
  const OnDone on_done = [&](size_t i, const std::vector<int32_t>& generated) {
    tokens += (double)(requests[i].prompt.size() + generated.size());
    if (options.show_progress) bar.update(++done, tokens);
  };
  GL_ASSIGN_OR_RETURN(const std::vector<std::vector<int32_t>> generated,
                      generate_all(requests, on_done));
  if (options.show_progress) bar.finish();
  std::vector<std::string> generations;
  for (const std::vector<int32_t>& ids : generated)
    generations.push_back(ruler_postprocess_prediction(tokenizer.decode(ids, /*skip_special=*/true)));
  TaskReport report = synthetic_report(name, samples, generations);
  report.config = {{"add_special_tokens", options.add_special}};
  return report;
}

}  // namespace

Result<TaskReport> synthetic_evaluate(const NewSequence& new_sequence, const ModelConfig& config,
                                      const Tokenizer& tokenizer, const std::string& name,
                                      const std::vector<SyntheticSample>& samples,
                                      const GenerationEvalOptions& options) {
  const GenerateAll one_at_a_time = [&](const std::vector<runtime::BatchRequest>& requests,
                                        const OnDone& on_done)
      -> Result<std::vector<std::vector<int32_t>>> {
    std::vector<std::vector<int32_t>> out;
    for (size_t i = 0; i < requests.size(); ++i) {
      GL_ASSIGN_OR_RETURN(std::vector<int32_t> generated,
                          greedy_generate(new_sequence, config.vocab_size, requests[i].prompt,
                                          requests[i].max_new_tokens, config.eos_token_ids));
      on_done(i, generated);
      out.push_back(std::move(generated));
    }
    return out;
  };
  return evaluate_with(one_at_a_time, config, tokenizer, name, samples, options);
}

Result<TaskReport> synthetic_evaluate(const NewSlots& new_slots, int batch,
                                      const ModelConfig& config, const Tokenizer& tokenizer,
                                      const std::string& name,
                                      const std::vector<SyntheticSample>& samples,
                                      const GenerationEvalOptions& options) {
  if (batch < 1) return make_error("synthetic evaluation: batch must be at least 1, got ", batch);
  const GenerateAll batched = [&](const std::vector<runtime::BatchRequest>& requests,
                                  const OnDone& on_done)
      -> Result<std::vector<std::vector<int32_t>>> {
    if (requests.empty()) return std::vector<std::vector<int32_t>>{};
    long max_context = 1;
    for (const runtime::BatchRequest& request : requests)
      max_context = std::max(max_context, (long)request.prompt.size() + request.max_new_tokens);
    GL_ASSIGN_OR_RETURN(std::unique_ptr<runtime::SequenceSlots> slots,
                        new_slots((int)std::min<size_t>(batch, requests.size()), max_context));
    return runtime::generate_batch(*slots, requests, config.eos_token_ids, on_done);
  };
  return evaluate_with(batched, config, tokenizer, name, samples, options);
}

Result<TaskReport> synthetic_evaluate(const Model& model, const Tokenizer& tokenizer,
                                      const std::string& name,
                                      const std::vector<SyntheticSample>& samples,
                                      const GenerationEvalOptions& options) {
  return synthetic_evaluate(runtime::cpu_sequences(model), model.config, tokenizer, name, samples,
                            options);
}

}  // namespace golinear::eval
