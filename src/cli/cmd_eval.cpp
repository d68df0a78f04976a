#include <algorithm>
#include <cstdio>
#include <sstream>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/loading.h"
#include "common/file.h"
#include "eval/cloze.h"
#include "eval/generation_eval.h"
#include "eval/likelihood_eval.h"
#include "eval/perplexity.h"
#include "eval/task_rows.h"
#include "io/text_data.h"
#include "runtime/cpu_sequence_slots.h"
#ifdef GOLINEAR_HAVE_CUDA
#include "eval/cuda/gpu_rows.h"
#include "model/cuda/gpu_model.h"
#include "runtime/cuda/sequence_slots.h"
#endif

namespace golinear::cli {

namespace {

constexpr const char* kTasks =
    "ppl, lambada, piqa, arc_easy, arc_challenge, hellaswag, winogrande, mmlu, niah, ruler, make-cloze";

int eval_ppl(const Argv& argv) {
  auto args = Args::parse("eval ppl", argv,
                          {{"input", true}, {"seq-len", true}, {"limit", true}, {"json", false},
                           {"device", true}},
                          1, 1);
  if (!args.ok()) return fail(args.error());
  if (!args->has("input")) return fail("golinear eval ppl: --input FILE is required");
  auto device_value = device_option(*args, "eval ppl");
  if (!device_value.ok()) return fail(device_value.error());
  const std::string device = *device_value;
  auto context = context_limit_of(args->positional()[0]);
  if (!context.ok()) return fail(context.error());
  auto seq_len = context_option(*args, "eval ppl", "seq-len", 2048, 2, *context);
  if (!seq_len.ok()) return fail(seq_len.error());
  auto limit = args->get_int("limit", 0, 1, 1L << 40);  // --limit N: the first N windows only
  if (!limit.ok()) return fail(limit.error());
  auto documents = text_documents_read(args->get("input"));
  if (!documents.ok()) return fail(documents.error());
  auto loaded = load_model_and_tokenizer(args->positional()[0], device, "eval ppl");
  if (!loaded.ok()) return fail(loaded.error());
  const Model& model = *loaded->model;
  const int bos = loaded->tokenizer.bos_id().value_or(model.config.bos_token_id);
  if (model.config.eos_token_ids.empty()) return fail("golinear eval ppl: the model defines no EOS token");
  auto stream = eval::eval_token_stream(*documents, loaded->tokenizer, model.config.eos_token_ids[0]);
  if (*limit > 0 && (long)stream.size() > *limit * (*seq_len - 1)) stream.resize(*limit * (*seq_len - 1));
  Result<eval::PerplexityResult> result = make_error("eval ppl: not run");
#ifdef GOLINEAR_HAVE_CUDA
  if (device == "cuda") {  // eval::perplexity's windows, the forward on the GPU (bf16)
    golinear::model::cuda::GpuModel& gpu = *loaded->gpu;
    auto forward = [&gpu](const int32_t* ids, int T, float* logits) {
      return gpu.forward(ids, T, logits, false);
    };
    result = eval::perplexity(forward, model.config.vocab_size, stream, bos, (int)*seq_len, true);
  }
#endif
  if (device == "cpu") result = eval::perplexity(model, stream, bos, (int)*seq_len, true);
  if (!result.ok()) return fail(result.error());
  const Json memory = memory_report(*loaded, "eval ppl");
  if (args->has("json")) {
    Json out = {{"ppl", result->ppl}, {"tokens", result->tokens}, {"windows", result->windows},
                {"seq_len", *seq_len}};
    if (!memory.empty()) out["memory"] = memory;
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("task  metric  value\nppl   ppl     %.4f   (%ld tokens, %ld windows of %ld)\n",
                result->ppl, result->tokens, result->windows, *seq_len);
  }
  return 0;
}

// Prints the report (table or --json) and writes --log-samples.
int report_emit(const Args& args, eval::TaskReport report, const std::string& model_dir) {
  if (args.has("log-samples")) {
    Status written = eval::report_write_samples(report, args.get("log-samples"));
    if (!written.ok()) return fail(written.error());
  }
  if (args.has("json")) {
    Json out = eval::report_json(report);
    out["model"] = model_dir;
    std::printf("%s\n", out.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
  } else {
    std::fputs(eval::report_table(report).c_str(), stdout);
  }
  return 0;
}

const std::vector<OptionSpec> kLikelihoodOptions = {
    {"data", true},        {"limit", true}, {"batch", true},       {"json", false},
    {"log-samples", true}, {"dev", true},   {"num-fewshot", true}, {"no-bos-legacy", false},
    {"device", true}};

int eval_likelihood(eval::LikelihoodTask task, const Argv& argv) {
  const std::string command = std::string("eval ") + eval::likelihood_task_name(task);
  auto args = Args::parse(command, argv, kLikelihoodOptions, 1, 1);
  if (!args.ok()) return fail(args.error());
  auto device = device_option(*args, command);
  if (!device.ok()) return fail(device.error());
  const bool mmlu = task == eval::LikelihoodTask::mmlu;
  if (!args->has("data")) return fail("golinear " + command + ": --data FILE is required");
  if (!mmlu && (args->has("dev") || args->has("num-fewshot")))
    return fail("golinear " + command + ": --dev and --num-fewshot are for mmlu only");
  auto limit = args->get_int("limit", 0, 0, 1L << 40);
  // Documents per scorer call: on the GPU one or more packed forwards (eval/loglikelihood.h
  // RowsPassLimits), so many by default; on the CPU only the progress steps.
  auto batch = args->get_int("batch", *device == "cuda" ? 64 : 1, 1, 1 << 20);
  auto num_fewshot = args->get_int("num-fewshot", 5, 0, 100);
  if (!limit.ok()) return fail(limit.error());
  if (!batch.ok()) return fail(batch.error());
  if (!num_fewshot.ok()) return fail(num_fewshot.error());
  if (mmlu && *num_fewshot > 0 && !args->has("dev"))
    return fail("golinear eval mmlu: --dev FILE (the dev rows of the subjects) is required for " +
                std::to_string(*num_fewshot) + "-shot; --num-fewshot 0 runs without");

  auto rows = eval::task_rows_read(args->get("data"));
  if (!rows.ok()) return fail(rows.error());
  if (*limit > 0 && (long)rows->size() > *limit) rows->resize(*limit);
  Result<std::vector<eval::LikelihoodDocument>> docs = make_error("unreachable");
  if (mmlu) {
    std::vector<eval::TaskRow> dev_rows;
    if (args->has("dev")) {
      auto read = eval::task_rows_read(args->get("dev"));
      if (!read.ok()) return fail(read.error());
      dev_rows = std::move(*read);
    }
    docs = eval::mmlu_documents(*rows, dev_rows, (int)*num_fewshot);
  } else {
    docs = eval::likelihood_documents(task, *rows);
  }
  if (!docs.ok()) return fail(docs.error());

  const std::string model_dir = args->positional()[0];
  auto loaded = load_model_and_tokenizer(model_dir, *device, command);
  if (!loaded.ok()) return fail(loaded.error());
  const Model& model = *loaded->model;
  eval::LikelihoodEvalOptions options;
  options.tokenize.add_special = !args->has("no-bos-legacy");
  const int eos = model.config.eos_token_ids.empty() ? 0 : model.config.eos_token_ids[0];
  options.tokenize.prefix_token_id = loaded->tokenizer.bos_id().value_or(
      model.config.bos_token_id >= 0 ? model.config.bos_token_id : eos);
  options.max_length = model.config.max_position_embeddings;
  options.batch = (int)*batch;
  options.show_progress = true;
  // On the CPU model (each document's shared prefixes through the cache), or on the GPU (bf16)
  // with the groups of `batch` documents packed into forwards.
  eval::DocumentsScorer score = eval::cpu_documents_scorer(model);
#ifdef GOLINEAR_HAVE_CUDA
  if (*device == "cuda")
    score = eval::rows_documents_scorer(golinear::eval::cuda::gpu_rows_forward(*loaded->gpu),
                                        model.config.vocab_size);
#endif
  auto report = eval::likelihood_evaluate(score, loaded->tokenizer, task, *docs, options);
  if (!report.ok()) return fail(report.error());
  if (*device == "cuda") report->config["device"] = "cuda";
  report->config["batch"] = *batch;
  if (Json memory = memory_report(*loaded, command); !memory.empty()) report->config["memory"] = memory;
  report->config["data"] = args->get("data");
  if (mmlu) report->config["num_fewshot"] = *num_fewshot;
  return report_emit(*args, std::move(*report), model_dir);
}

// "0,25,50" → {0, 25, 50}, each in [0, 100].
Result<std::vector<double>> depths_parse(const std::string& text) {
  std::vector<double> depths;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    char* end = nullptr;
    const double depth = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(depth >= 0 && depth <= 100))
      return make_error("golinear eval niah: --depths expects percentages in [0, 100] separated by commas, got '",
                        text, "'");
    depths.push_back(depth);
  }
  if (depths.empty()) return make_error("golinear eval niah: --depths is empty");
  return depths;
}

const std::vector<OptionSpec> kSyntheticOptions = {
    {"length", true},   {"samples", true}, {"seed", true},       {"depths", true},
    {"variant", true},  {"subtask", true}, {"haystack", true},   {"json", false},
    {"log-samples", true}, {"batch", true}, {"no-bos-legacy", false}, {"device", true}};

int eval_synthetic(const std::string& task, const Argv& argv) {
  const std::string command = "eval " + task;
  auto args = Args::parse(command, argv, kSyntheticOptions, 1, 1);
  if (!args.ok()) return fail(args.error());
  auto device = device_option(*args, command);
  if (!device.ok()) return fail(device.error());
  const std::string model_dir = args->positional()[0];
  if (task == "niah" && args->has("subtask")) return fail("golinear eval niah: --subtask is for ruler (use --variant)");
  if (task == "ruler" && (args->has("variant") || args->has("depths")))
    return fail("golinear eval ruler: --variant and --depths are for niah (use --subtask)");
  auto context = context_limit_of(model_dir);
  if (!context.ok()) return fail(context.error());
  auto length = context_option(*args, command, "length", 4096, 64, *context);
  auto samples = args->get_int("samples", task == "niah" ? 10 : 5, 1, 1 << 20);
  auto seed = args->get_int("seed", 0, 0, 1L << 62);
  auto variant = args->get_int("variant", 1, 1, 3);
  auto batch = args->get_int("batch", 1, 1, 1 << 20);
  for (const Result<long>* value : {&length, &samples, &seed, &variant, &batch})
    if (!value->ok()) return fail(value->error());
  auto depths = depths_parse(args->get("depths", "0,25,50,75,100"));
  if (!depths.ok()) return fail(depths.error());

  std::string essay;
  if (args->has("haystack")) {
    auto documents = text_documents_read(args->get("haystack"));
    if (!documents.ok()) return fail(documents.error());
    for (const std::string& document : *documents) essay += document + "\n\n";
  }
  // Which generators run, in order.
  std::vector<std::string> subtasks;
  if (task == "niah") {
    subtasks = {"single"};
  } else {
    const std::string subtask = args->get("subtask", "all");
    const std::vector<std::string> all = {"multikey", "multivalue", "multiquery", "variable_tracking",
                                          "frequent_words"};
    if (subtask == "all") subtasks = all;
    else if (std::find(all.begin(), all.end(), subtask) != all.end()) subtasks = {subtask};
    else return fail("golinear eval ruler: unknown --subtask '" + subtask +
                     "' (multikey, multivalue, multiquery, variable_tracking, frequent_words, all)");
  }

  auto loaded = load_model_and_tokenizer(model_dir, *device, command);
  if (!loaded.ok()) return fail(loaded.error());
  const bool add_special = !args->has("no-bos-legacy");
  const Tokenizer& tokenizer = loaded->tokenizer;
  eval::TokenCounter count = [&](const std::string& text) {
    return (long)tokenizer.encode(text, add_special).size();
  };
  eval::SyntheticRandom random((uint64_t)*seed);
  std::vector<eval::SyntheticSample> generated;
  std::string name = task;
  for (const std::string& subtask : subtasks) {
    for (long i = 0; i < *samples; ++i) {
      Result<eval::SyntheticSample> sample = make_error("unreachable");
      if (subtask == "single") {
        auto niah = eval::niah_config((int)*variant);
        if (!niah.ok()) return fail(niah.error());
        if (niah->essay_haystack && essay.empty())
          return fail("golinear eval niah: --variant " + std::to_string(*variant) +
                      " uses an essay haystack: pass a prose file with --haystack FILE (.txt or .jsonl)");
        if (!niah->essay_haystack && args->has("haystack"))
          return fail("golinear eval niah: --variant 1 uses the noise haystack; --haystack is for --variant 2 and 3");
        niah->essay = essay;
        niah->depths = {(*depths)[i % depths->size()]};
        name = niah->task;
        sample = eval::needle_sample_generate(*niah, *length, count, random);
      } else if (subtask == "variable_tracking") {
        sample = eval::variable_tracking_sample_generate(*length, count, random);
      } else if (subtask == "frequent_words") {
        sample = eval::frequent_words_sample_generate(*length, count, random);
      } else {
        auto needle = eval::ruler_needle_config(subtask);
        if (!needle.ok()) return fail(needle.error());
        needle->essay_haystack = !essay.empty();
        needle->essay = essay;
        sample = eval::needle_sample_generate(*needle, *length, count, random);
      }
      if (!sample.ok()) return fail(command + ": " + sample.error());
      generated.push_back(std::move(*sample));
    }
  }
  eval::GenerationEvalOptions options;
  options.add_special = add_special;
  options.max_tokens = context->tokens;
  options.show_progress = true;
  // Greedy generation, --batch samples at a time over sequence slots: on the GPU (bf16 prefill,
  // then the batched decode step), or on the CPU model; on the CPU --batch 1 runs one sequence
  // at a time (the same tokens as any batch).
  const Model& model = *loaded->model;
  Result<eval::TaskReport> report = make_error("eval: not run");
  if (*device == "cpu" && *batch == 1) {
    report = eval::synthetic_evaluate(model, tokenizer, name, generated, options);
  } else {
    const eval::NewSlots slots = [&loaded, &device, command](int count, long max_context) {
      return sequence_slots_of(*loaded, *device, count, max_context, command);
    };
    report = eval::synthetic_evaluate(slots, (int)*batch, model.config, tokenizer, name, generated, options);
  }
  if (!report.ok()) return fail(report.error());
  if (*device == "cuda") report->config["device"] = "cuda";
  report->config["batch"] = *batch;
  if (Json memory = memory_report(*loaded, command); !memory.empty()) report->config["memory"] = memory;
  report->config["length"] = *length;
  report->config["seed"] = *seed;
  report->config["samples_per_task"] = *samples;
  report->config["haystack"] = args->has("haystack") ? args->get("haystack") : "noise";
  return report_emit(*args, std::move(*report), model_dir);
}

int eval_make_cloze(const Argv& argv) {
  auto args = Args::parse("eval make-cloze", argv,
                          {{"input", true}, {"out", true}, {"min-words", true}, {"max-words", true},
                           {"min-letters", true}, {"max-items", true}},
                          0, 0);
  if (!args.ok()) return fail(args.error());
  if (!args->has("input") || !args->has("out"))
    return fail("golinear eval make-cloze: --input FILE and --out FILE are required");
  eval::ClozeOptions options;
  auto min_words = args->get_int("min-words", options.min_words, 1, 100000);
  auto max_words = args->get_int("max-words", options.max_words, 1, 100000);
  auto min_letters = args->get_int("min-letters", options.min_letters, 1, 100);
  auto max_items = args->get_int("max-items", options.max_items, 1, 1L << 40);
  for (const Result<long>* value : {&min_words, &max_words, &min_letters, &max_items})
    if (!value->ok()) return fail(value->error());
  options = {(int)*min_words, (int)*max_words, (int)*min_letters, *max_items};
  auto documents = text_documents_read(args->get("input"));
  if (!documents.ok()) return fail(documents.error());
  const std::vector<std::string> passages = eval::cloze_passages_build(*documents, options);
  if (passages.empty()) return fail("golinear eval make-cloze: no passage of " + args->get("input") + " qualifies");
  std::string text;
  for (const std::string& passage : passages) text += Json{{"text", passage}}.dump() + "\n";
  Status written = file_write_atomic(args->get("out"), text);
  if (!written.ok()) return fail(written.error());
  std::fprintf(stderr, "golinear eval make-cloze: %zu passages → %s\n", passages.size(), args->get("out").c_str());
  return 0;
}

}  // namespace

int cmd_eval(const Argv& argv) {
  if (argv.empty()) return fail(std::string("golinear eval: missing TASK (") + kTasks + ")");
  const std::string task = argv[0];
  Argv rest(argv.begin() + 1, argv.end());
  if (task == "ppl") return eval_ppl(rest);
  if (task == "make-cloze") return eval_make_cloze(rest);
  if (task == "niah" || task == "ruler") return eval_synthetic(task, rest);
  if (auto likelihood = eval::likelihood_task_from_name(task)) return eval_likelihood(*likelihood, rest);
  return fail("golinear eval: unknown task '" + task + "' (available: " + kTasks + ")");
}

}  // namespace golinear::cli
