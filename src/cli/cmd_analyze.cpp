#include <cstdio>
#include <filesystem>
#include <sstream>

#include "analysis/analyze.h"
#include "analysis/report.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/loading.h"
#include "io/packed_dataset.h"
#ifdef GOLINEAR_HAVE_CUDA
#include "analysis/cuda/gpu_trace.h"
#include "model/cuda/gpu_model.h"
#endif

namespace golinear::cli {

namespace {

namespace fs = std::filesystem;

// "a,b" → {"a", "b"}; empty items are refused.
Result<std::vector<std::string>> split_list(const std::string& text, const std::string& option) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    items.push_back(item);
  for (const std::string& i : items)
    if (i.empty()) return make_error("golinear analyze: --", option, " has an empty item in '", text, "'");
  return items;
}

// The student's label: its directory name, made unique with "#2", "#3"...
std::string label_of(const std::string& dir, const std::vector<analysis::StudentMixers>& taken) {
  std::string base = fs::path(dir).lexically_normal().filename().string();
  if (base.empty()) base = fs::path(dir).lexically_normal().parent_path().filename().string();
  if (base.empty()) base = "student";
  std::string label = base;
  for (int n = 2;; ++n) {
    bool used = false;
    for (const auto& s : taken) used |= s.label == label;
    if (!used) return label;
    label = base + "#" + std::to_string(n);
  }
}

}  // namespace

int cmd_analyze(const Argv& argv) {
  auto args = Args::parse("analyze", argv,
                          {{"student", true}, {"data", true}, {"tokens", true}, {"seq-len", true},
                           {"out", true}, {"sinks", true}, {"window", true}, {"seed", true},
                           {"device", true}, {"sensitivity", false}},
                          1, 1);
  if (!args.ok()) return fail(args.error());
  const std::string model_dir = args->positional()[0];
  auto device = device_option(*args, "analyze");
  if (!device.ok()) return fail(device.error());
  const std::string data_path = args->get("data"), out = args->get("out");
  if (data_path.empty()) return fail("golinear analyze: --data FILE is required");
  if (out.empty()) return fail("golinear analyze: --out DIR is required");
  if (fs::exists(out)) return fail(out + ": already exists; choose another --out");
  if (fs::exists(out + ".partial"))
    return fail(out + ".partial: left by an interrupted run; delete it first");
  auto config = load_model_config(model_dir);
  if (!config.ok()) return fail(config.error());
  auto seq_len = args->get_int("seq-len", std::min(1024, config->max_position_embeddings), 2,
                               config->max_position_embeddings);
  if (!seq_len.ok()) return fail(seq_len.error());
  auto tokens = args->get_int("tokens", 4096, 2, 1L << 40);
  if (!tokens.ok()) return fail(tokens.error());
  auto seed = args->get_int("seed", 0, 0, 1L << 62);
  if (!seed.ok()) return fail(seed.error());
  std::vector<std::string> student_dirs;
  if (args->has("student")) {
    auto dirs = split_list(args->get("student"), "student");
    if (!dirs.ok()) return fail(dirs.error());
    student_dirs = *dirs;
  }

  if (args->has("sensitivity") && student_dirs.empty())
    return fail("golinear analyze: --sensitivity measures students: give --student DIR");
  if (args->has("sensitivity") && *device != "cpu")
    return fail("golinear analyze: --sensitivity runs the whole model on the CPU (the GPU loads "
                "no host weights): use --device cpu");
  auto loaded = load_model_and_tokenizer(model_dir, *device, "analyze");
  if (!loaded.ok()) return fail(loaded.error());
  Model& model = *loaded->model;
  std::vector<analysis::StudentMixers> students;
  for (const std::string& dir : student_dirs) {
    auto student = analysis::student_mixers_load(model, dir, label_of(dir, students));
    if (!student.ok()) return fail(student.error());
    students.push_back(std::move(*student));
  }
  // Sinks and window of the sink/far mass: the first student's recipe unless given.
  analysis::AnalysisOptions options;
  if (!students.empty()) {
    options.sinks = students[0].options.sinks;
    options.window = students[0].options.window;
  }
  auto sinks = args->get_int("sinks", options.sinks, 0, *seq_len);
  if (!sinks.ok()) return fail(sinks.error());
  auto window = args->get_int("window", options.window, 0, *seq_len);
  if (!window.ok()) return fail(window.error());
  options.sinks = (int)*sinks;
  options.window = (int)*window;
  options.show_progress = true;

  const int bos = loaded->tokenizer.bos_id().value_or(model.config.bos_token_id);
  const int eos = model.config.eos_token_ids.empty() ? -1 : model.config.eos_token_ids[0];
  DatasetOptions data_options;
  data_options.seq_len = (int)*seq_len;
  data_options.max_sequences = (*tokens + *seq_len - 1) / *seq_len;
  data_options.seed = (uint64_t)*seed;
  const Tokenizer& tokenizer = loaded->tokenizer;
  auto data = dataset_build(
      data_path, [&tokenizer](const std::string& text) { return tokenizer.encode(text, /*add_special=*/false); },
      bos, eos, data_options);
  if (!data.ok()) return fail(data.error());
  if (data->size() == 0)
    return fail(data_path + ": not enough text for one sequence of " + std::to_string(*seq_len) + " tokens");
  if (data->size() < data_options.max_sequences)
    std::fprintf(stderr, "golinear analyze: %s holds %ld sequences of %ld tokens; using them all\n",
                 data_path.c_str(), data->size(), *seq_len);

  // The teacher's forward: the CPU model's, or the GPU's (bf16) with its q, k (and the mixer
  // inputs and outputs the students need) downloaded; diagnostics and students on the CPU.
  Result<analysis::AnalysisResult> result = make_error("analyze: not run");
#ifdef GOLINEAR_HAVE_CUDA
  if (*device == "cuda") {
    if (!students.empty())
      std::fprintf(stderr, "golinear analyze: --device cuda: the teacher runs on the GPU (bf16); "
                           "the students' mixers run on the CPU on its traced inputs\n");
    result = analysis::analysis_run(model, golinear::analysis::cuda::gpu_teacher_trace(*loaded->gpu), students,
                                    data->tokens.data(), data->size(), data->seq_len, options);
  }
#endif
  if (*device == "cpu")
    result = analysis::analysis_run(model, students, data->tokens.data(), data->size(),
                                    data->seq_len, options);
  if (!result.ok()) return fail(result.error());
  if (args->has("sensitivity")) {
    Status st = analysis::add_layer_sensitivity(model, students, *result, data->tokens.data(),
                                                data->size(), data->seq_len, true);
    if (!st.ok()) return fail(st.error());
  }
  Json settings = {{"model", model_dir},     {"data", data_path},          {"seq_len", *seq_len},
                   {"sequences", data->size()}, {"tokens", data->size() * *seq_len},
                   {"seed", *seed},          {"students", student_dirs}};
  if (*device == "cuda") settings["device"] = "cuda";
  if (Status st = analysis::analysis_write_report(*result, settings, out); !st.ok())
    return fail(st.error());
  Json summary = {{"out", out}, {"ranking", analysis::hardness_ranking(result->hardness)}};
  for (const auto& s : result->students) {
    double total = 0;
    int layers = 0;
    for (int l = 0; l < result->L; ++l)
      if (s.linearized(l)) total += s.layer_nmse[l], ++layers;
    summary["nmse"][s.label] = layers ? total / layers : 0.0;
  }
  if (Json memory = memory_report(*loaded, "analyze"); !memory.empty()) summary["memory"] = memory;
  std::printf("%s\n", summary.dump().c_str());
  return 0;
}

}  // namespace golinear::cli
