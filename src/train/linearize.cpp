#include "train/linearize.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "analysis/analyze.h"
#include "analysis/diagnostics.h"
#include "common/file.h"
#include "io/checkpoint.h"
#include "model/linearization.h"
#include "train/attention_transfer.h"
#include "train/distillation.h"
#include "train/exact_budget.h"

namespace golinear::train {

namespace {

namespace fs = std::filesystem;

// The attention-transfer schedule: warmup 5% of the steps (at most 100), a resume checkpoint
// every 10%.
TrainOptions transfer_options(const LinearizeOptions& s) {
  TrainOptions options;
  options.steps = s.steps;
  options.batch = s.batch;
  options.lr = s.lr;
  options.warmup = std::max(1L, std::min(100L, s.steps / 20));
  options.checkpoint_every = std::max(1L, s.steps / 10);
  options.resume = s.resume;
  options.stop_after = s.stop_after;
  options.nan_fault = s.nan_fault;
  return options;
}

// A probe's schedule: `steps` (at least 1) of the run's transfer options, warmup 5% of them (at
// most 100), one checkpoint at the end, never resumed or stopped early.
TrainOptions probe_options(const LinearizeOptions& s, long steps) {
  TrainOptions options = transfer_options(s);
  options.steps = std::max(1L, steps);
  options.warmup = std::max(1L, std::min(100L, options.steps / 20));
  options.checkpoint_every = options.steps;
  options.resume = false;
  options.stop_after = 0;
  return options;
}

// The end-to-end schedule of `steps` steps on the transfer options `options`: the run's
// distillation rate, warmup 5% (at most 50), a resume checkpoint every 10%.
TrainOptions e2e_options(const LinearizeOptions& s, TrainOptions options, long steps) {
  options.steps = steps;
  options.lr = s.e2e_lr;
  options.warmup = std::max(1L, std::min(50L, steps / 20));
  options.checkpoint_every = std::max(1L, steps / 10);
  return options;
}

// The run's LoRA adapters (s.lora) on the layers `students` linearize; none when disabled.
Result<LoraAdapters> students_lora(const LinearizeOptions& s, const Model& model,
                                   const MixerStack& students) {
  if (!s.lora.enabled()) return LoraAdapters{};
  std::vector<bool> adapted;
  for (const auto& mixer : students) adapted.push_back(mixer->kind() != "softmax");
  return lora_create(model, s.lora, adapted, s.seed);
}

// The training sequences, tokenized on first use (a recipe with nothing to train never reads
// them).
class LazyData {
 public:
  LazyData(const LinearizeOptions& s, const Model& model, const Tokenizer& tokenizer)
      : s_(s), model_(model), tokenizer_(tokenizer) {}
  Result<const PackedDataset*> get() {
    if (data_) return &*data_;
    const int bos = tokenizer_.bos_id().value_or(model_.config.bos_token_id);
    const int eos = model_.config.eos_token_ids.empty() ? -1 : model_.config.eos_token_ids[0];
    DatasetOptions data_options;
    data_options.seq_len = s_.seq_len;
    data_options.max_sequences = std::max(s_.steps, s_.e2e_steps) * s_.batch;
    data_options.seed = s_.seed;
    std::fprintf(stderr, "golinear linearize: tokenizing %s\n", s_.data.c_str());
    const Tokenizer& tokenizer = tokenizer_;
    GL_ASSIGN_OR_RETURN(
        PackedDataset data,
        dataset_build(
            s_.data, [&tokenizer](const std::string& text) { return tokenizer.encode(text, /*add_special=*/false); },
            bos, eos, data_options));
    if (data.size() < std::max(s_.steps, s_.e2e_steps) * s_.batch)
      std::fprintf(stderr, "golinear linearize: %s holds %ld sequences of %d tokens; %ld steps × %d "
                   "will revisit them\n", s_.data.c_str(), data.size(), s_.seq_len, s_.steps, s_.batch);
    data_ = std::move(data);
    return &*data_;
  }

 private:
  const LinearizeOptions& s_;
  const Model& model_;
  const Tokenizer& tokenizer_;
  std::optional<PackedDataset> data_;
};

// Layers kept as softmax attention: `listed`, plus K more chosen by the teacher's hardness on
// the first sequences of the training data (docs/ANALYZE.md), evenly spaced, or by the layer
// sensitivity of an analysis's summary.json (the K layers whose linearization costs most).
struct FullLayers {
  std::vector<int> layers;
  Json selection = Json::object();
};

Result<FullLayers> choose_full_layers(const Model& model, LazyData& data, const std::vector<int>& listed, int K,
                                      const std::string& select) {
  FullLayers out;
  out.layers = listed;
  if (K <= 0) return out;
  // The per-layer signal the K largest of which are kept: hardness or sensitivity (uniform: none).
  std::vector<double> signal(model.config.num_layers, 0.0);
  const bool by_sensitivity = is_analysis_summary(select);
  if (select == "hard") {
    GL_ASSIGN_OR_RETURN(const PackedDataset* sequences, data.get());
    const long n = std::min(4L, sequences->size());
    GL_ASSIGN_OR_RETURN(signal, analysis::teacher_layer_hardness(model, sequences->tokens.data(), n,
                                                                 sequences->seq_len, true));
  } else if (by_sensitivity) {
    auto sensitivity = analysis_layer_sensitivity(select, model.config.num_layers);
    if (!sensitivity.ok()) return make_error("golinear linearize: --select: ", sensitivity.error());
    signal = std::move(*sensitivity);
  }
  auto chosen = analysis::select_full_layers(signal, K, by_sensitivity ? "hard" : select);
  if (!chosen.ok()) return make_error("golinear linearize: --keep-full: ", chosen.error());
  for (int l : *chosen)
    if (std::find(out.layers.begin(), out.layers.end(), l) == out.layers.end()) out.layers.push_back(l);
  out.selection = {{"method", by_sensitivity ? "sensitivity" : select}, {"k", K}, {"layers", *chosen}};
  if (select == "hard") out.selection["hardness"] = signal;
  if (by_sensitivity) out.selection["sensitivity"] = signal, out.selection["from"] = select;
  std::fprintf(stderr, "golinear linearize: keeping layers %s as softmax attention (%s)\n",
               Json(*chosen).dump().c_str(), select.c_str());
  return out;
}

// --window-by SIGNAL: per-layer windows with the uniform recipe's total (train/exact_budget.h),
// from a probe of the uniform recipe run here (`sensitivity`: its layers' perplexity costs;
// `probe`: its per-layer transfer NMSE), a finished run's directory (its NMSE), an analysis's
// summary.json (its sensitivity) or the teacher's hardness; a resumed run reads the windows its
// first run wrote to OUT.partial/window_allocation.json. Layers kept as softmax take no part.
// Returns what the report records.
Result<Json> allocate_layer_windows(const LinearizeOptions& s, Model& model, LazyData& data,
                                    const Trainers& trainers, const std::vector<int>& full_layers,
                                    LayerBudgets& budgets) {
  const int L = model.config.num_layers;
  std::vector<double> signal;
  long probe_tokens = 0;
  if (s.window_signal == "probe" || s.window_signal == "sensitivity") {
    // A probe: the uniform recipe trained on an eighth of the transfer steps, its per-layer NMSE
    // the signal; or, for the sensitivity, on a quarter (then half as many end-to-end steps, with
    // the run's LoRA, when the run has that stage), and each layer's perplexity cost linearized
    // alone on 16 K tokens of the training data (forwards on the trainers' device).
    const bool by_cost = s.window_signal == "sensitivity";
    if (s.steps <= 0)
      return make_error("golinear linearize: --window-by ", s.window_signal, " needs an attention-transfer stage");
    GL_ASSIGN_OR_RETURN(const PackedDataset* sequences, data.get());
    GL_ASSIGN_OR_RETURN(MixerStack probe, linearized_mixers(model, s.mixer, full_layers, s.seed));
    TrainOptions options = probe_options(s, s.steps / (by_cost ? 4 : 8));
    std::fprintf(stderr, "golinear linearize: probe: %ld transfer steps of the uniform recipe for the per-layer windows\n",
                 options.steps);
    GL_ASSIGN_OR_RETURN(TrainReport report, trainers.transfer(model, probe, *sequences, options));
    signal = report.layer_nmse;
    probe_tokens = options.steps * s.batch * (long)s.seq_len;
    if (by_cost && s.e2e_steps > 0) {
      GL_ASSIGN_OR_RETURN(LoraAdapters lora, students_lora(s, model, probe));
      options = e2e_options(s, options, std::max(1L, options.steps / 2));
      options.checkpoint_every = options.steps;
      std::fprintf(stderr, "golinear linearize: probe: %ld end-to-end steps\n", options.steps);
      GL_ASSIGN_OR_RETURN(report, trainers.end_to_end(model, probe, *sequences, options,
                                                       lora.enabled() ? &lora : nullptr));
      probe_tokens += options.steps * s.batch * (long)s.seq_len;
    }
    if (by_cost) {
      const long n = std::min(sequences->size(), std::max(1L, 16384L / sequences->seq_len));
      std::fprintf(stderr, "golinear linearize: probe: each layer's perplexity cost on %ld × %d tokens (%s)\n",
                   n, sequences->seq_len, trainers.device.c_str());
      if (!trainers.layer_sensitivity)
        return make_error("golinear linearize: the trainers cannot measure a layer sensitivity");
      GL_ASSIGN_OR_RETURN(signal, trainers.layer_sensitivity(model, probe, sequences->tokens.data(), n,
                                                             sequences->seq_len));
      for (double& v : signal) v = sensitivity_signal(v);
    }
  } else if (s.window_signal == "hardness") {
    GL_ASSIGN_OR_RETURN(const PackedDataset* sequences, data.get());
    const long n = std::min(4L, sequences->size());
    GL_ASSIGN_OR_RETURN(signal, analysis::teacher_layer_hardness(model, sequences->tokens.data(), n,
                                                                 sequences->seq_len, true));
  } else if (is_analysis_summary(s.window_signal)) {
    auto sensitivity = analysis_layer_sensitivity(s.window_signal, L);
    if (!sensitivity.ok()) return make_error("golinear linearize: --window-by: ", sensitivity.error());
    signal = std::move(*sensitivity);
  } else {
    auto nmse = probe_layer_nmse(s.window_signal, L);
    if (!nmse.ok()) return make_error("golinear linearize: --window-by: ", nmse.error());
    signal = std::move(*nmse);
  }
  for (int l : full_layers) signal[l] = -1.0;
  // Quanta of 8 keys, at least 8 per layer; a smaller window is split in quanta of itself. The
  // sensitivity signal keeps 3 quanta per layer (a layer that costs nothing at its trained window
  // can cost at 8 keys): the rule whose windows RESULTS.md §2d trained (+5.5%); the 1-quantum
  // floor was not trained with this signal.
  const int quantum = std::max(1, std::min(8, s.mixer.window));
  const bool by_sensitivity = s.window_signal == "sensitivity" || is_analysis_summary(s.window_signal);
  const int floor = by_sensitivity
                        ? std::max(quantum, std::min(3 * quantum, s.mixer.window / quantum * quantum))
                        : quantum;
  // A sensitivity where no layer costs anything measurable (a short probe of a small model) has
  // nothing to allocate by: the windows stay uniform.
  const bool measured = std::any_of(signal.begin(), signal.end(), [](double v) { return v > 0.0; });
  auto windows = by_sensitivity && !measured
                     ? Result<std::vector<int>>(std::vector<int>(L, s.mixer.window))
                     : allocate_windows(signal, s.mixer.window, quantum, floor);
  if (!windows.ok()) return make_error("golinear linearize: --window-by: ", windows.error());
  budgets.windows = *windows;
  std::fprintf(stderr, "golinear linearize: per-layer windows %s (by %s%s)\n",
               Json(*windows).dump().c_str(), s.window_signal.c_str(),
               measured ? "" : "; no layer's cost is measurable: uniform");
  Json out{{"signal", s.window_signal == "hardness"                ? "hardness"
                      : s.window_signal == "sensitivity"         ? "probe layer_sensitivity"
                      : is_analysis_summary(s.window_signal) ? "analysis layer_sensitivity"
                                                             : "probe layer_nmse"},
           {"from", s.window_signal}, {"values", signal}, {"windows", *windows}};
  if (probe_tokens > 0) out["probe_tokens"] = probe_tokens;
  return out;
}

// --init DIR: the students start from the new parameters of a linearized checkpoint DIR of the
// same base (its recipe and kept layers included), e.g. to add an end-to-end stage or more tokens
// to a finished run. `model` must hold the teacher's mixers; they are back in place on return.
struct InitialStudents {
  MixerStack mixers;
  LoraAdapters lora;
  mixers::MixerOptions options;
  LayerBudgets budgets;
  Json selection;
};

Result<InitialStudents> initial_students(Model& model, const std::string& dir, const std::string& base) {
  const std::string json_path = dir + "/linearization.json";
  GL_ASSIGN_OR_RETURN(Json json, json_read_file(json_path));
  GL_ASSIGN_OR_RETURN(LinearizationRecipe recipe, linearization_recipe_parse(json, model.config, json_path));
  if (recipe.base)  // an adapter names its base: it must be this run's
    GL_TRY(base_reference_check(*recipe.base, base, str_cat("golinear linearize: --init ", dir)));
  InitialStudents out;
  out.options = recipe.options;
  out.budgets = recipe.budgets;
  out.selection = {{"init", dir}};
  if (recipe.training.is_object() && recipe.training.contains("keep_full_selection"))
    out.selection["init_keep_full_selection"] = recipe.training["keep_full_selection"];
  MixerStack teacher = std::move(model.mixers);
  Status applied = linearization_apply(model, dir);
  out.mixers = std::move(model.mixers);
  out.lora = std::move(model.lora);
  model.mixers = std::move(teacher);
  model.lora = LoraAdapters{};
  if (!applied.ok()) return make_error("golinear linearize: --init: ", applied.error());
  std::fprintf(stderr, "golinear linearize: starting from the new parameters of %s\n", dir.c_str());
  return out;
}

// OUT.partial (or a sweep's OUT.partial/<name>) ready to be written into: a copy of the base
// checkpoint's files, or an empty directory for an adapter.
Status output_prepare(const LinearizeOptions& s, const std::string& dir) {
  if (!s.adapter) return checkpoint_copy_base(s.base, dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(dir, ": cannot create directory (", ec.message(), ")");
  return ok_status();
}

// What linearization.json records of the base: for an adapter that will be `final_dir`, the
// base's path and fingerprint; nothing for a directory that holds the base's files.
Result<std::optional<BaseReference>> base_reference_for(const LinearizeOptions& s,
                                                        const std::string& final_dir) {
  if (!s.adapter) return std::optional<BaseReference>();
  GL_ASSIGN_OR_RETURN(BaseReference reference, base_reference_make(s.base, final_dir));
  return std::optional<BaseReference>(std::move(reference));
}

Status move_into_place(const std::string& partial, const std::string& out) {
  std::error_code ec;
  fs::rename(partial, out, ec);
  if (ec) return make_error(out, ": cannot move the finished run into place (", ec.message(), ")");
  return ok_status();
}

// Temporaries of writes a killed run left behind (file_write_atomic's PATH.tmp.PID), which must
// not end up in OUT.
void remove_stale_temporaries(const std::string& partial) {
  std::error_code ec;
  std::vector<fs::path> stale;
  for (auto it = fs::recursive_directory_iterator(partial, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->path().filename().string().find(".tmp.") != std::string::npos) stale.push_back(it->path());
  for (const fs::path& path : stale) fs::remove(path, ec);
}

// The last steps of a run: its resume files go, OUT.partial becomes OUT.
Status finish_run(const std::string& partial, const std::string& out) {
  std::error_code ec;
  for (const char* name : {"transfer_state.safetensors", "e2e_state.safetensors", "transfer_report.json",
                           "window_allocation.json"})
    fs::remove(partial + "/" + name, ec);
  remove_stale_temporaries(partial);
  return move_into_place(partial, out);
}

LinearizeOutcome stopped_at(const std::string& what, long done, long total) {
  LinearizeOutcome outcome;
  outcome.stopped = str_cat("stopped after ", what, done, " of ", total, "; resume with --resume");
  return outcome;
}

// --sweep: several recipes trained by attention transfer against one teacher pass per sequence
// (DESIGN.md's ablations at the price of one teacher), each written as a complete linearized
// checkpoint (or an adapter) OUT/<name>.
Result<LinearizeOutcome> run_sweep(const LinearizeOptions& s, Model& model, LazyData& lazy_data,
                                   const std::string& partial) {
  const std::vector<SweepRecipe>& recipes = s.sweep;
  const std::string& path = s.sweep_path;
  GL_ASSIGN_OR_RETURN(const PackedDataset* data, lazy_data.get());
  struct Entry {
    FullLayers full;
    MixerStack students;
  };
  std::vector<Entry> entries;
  for (const SweepRecipe& r : recipes) {
    Entry e;
    auto full = choose_full_layers(model, lazy_data, r.keep_full_layers, r.keep_full, r.select);
    if (!full.ok()) return make_error(path, ": recipe '", r.name, "': ", full.error());
    e.full = std::move(*full);
    auto students = linearized_mixers(model, r.options, e.full.layers, s.seed, r.budgets);
    if (!students.ok()) return make_error(path, ": recipe '", r.name, "': ", students.error());
    e.students = std::move(*students);
    entries.push_back(std::move(e));
  }
  std::vector<MixerStack*> stacks;
  std::vector<std::string> states;
  std::vector<std::optional<BaseReference>> base_references;
  for (size_t i = 0; i < recipes.size(); ++i) {
    const std::string dir = partial + "/" + recipes[i].name;
    GL_TRY(output_prepare(s, dir));
    GL_ASSIGN_OR_RETURN(std::optional<BaseReference> reference,
                        base_reference_for(s, s.out + "/" + recipes[i].name));
    base_references.push_back(std::move(reference));
    stacks.push_back(&entries[i].students);
    states.push_back(dir + "/transfer_state.safetensors");
  }
  GL_ASSIGN_OR_RETURN(std::vector<TrainReport> reports,
                      attention_transfer_many(model, stacks, *data, transfer_options(s), states));
  if (reports[0].steps_done < s.steps) return stopped_at("step ", reports[0].steps_done, s.steps);
  Json summary = Json::array();
  MixerStack teacher_mixers = std::move(model.mixers);
  for (size_t i = 0; i < recipes.size(); ++i) {
    const TrainReport& report = reports[i];
    model.mixers = std::move(entries[i].students);
    LinearizationRecipe recipe = linearization_recipe_of(model, recipes[i].options, recipes[i].budgets);
    Json transfer = {{"steps", s.steps}, {"tokens", s.steps * s.batch * (long)s.seq_len},
                     {"lr", s.lr}, {"final_nmse", report.final_loss},
                     {"layer_nmse", report.layer_nmse}, {"tokens_per_s", report.tokens_per_s}};
    recipe.training = {{"stage", "transfer"}, {"base", s.base}, {"data", s.data}, {"batch", s.batch},
                       {"seq_len", s.seq_len}, {"seed", s.seed}, {"sweep", path},
                       {"transfer", transfer}, {"e2e", Json::object()},
                       {"keep_full_selection", entries[i].full.selection}};
    recipe.base = base_references[i];
    const std::string dir = partial + "/" + recipes[i].name;
    Status saved = linearization_save(model, recipe, dir);
    entries[i].students = std::move(model.mixers);
    if (!saved.ok()) {
      model.mixers = std::move(teacher_mixers);
      return std::move(saved).take_error();
    }
    std::error_code ignored;
    fs::remove(dir + "/transfer_state.safetensors", ignored);
    summary.push_back({{"name", recipes[i].name}, {"transfer", transfer}});
  }
  model.mixers = std::move(teacher_mixers);
  GL_TRY(move_into_place(partial, s.out));
  LinearizeOutcome outcome;
  outcome.finished = true;
  outcome.summary = {{"out", s.out}, {"recipes", summary}};
  return outcome;
}

}  // namespace

Trainers cpu_trainers() {
  return {attention_transfer,
          [](Model& model, MixerStack& students, const PackedDataset& data, const TrainOptions& options,
             LoraAdapters* lora) { return distill_end_to_end(model, students, data, options, lora); },
          [](Model& teacher, MixerStack& student, const int32_t* tokens, long N, int T) {
            return analysis::layer_sensitivity(teacher, student, tokens, N, T);
          },
          "cpu"};
}

Status linearize_check_output(const LinearizeOptions& options) {
  const std::string partial = options.out + ".partial";
  std::error_code ec;
  if (fs::exists(options.out, ec)) return make_error(options.out, ": already exists; choose another --out");
  if (fs::exists(partial, ec) && !options.resume)
    return make_error(partial, ": an interrupted run is there; pass --resume to continue it or delete it");
  if (options.adapter) {  // an adapter's directory must not end up holding a copy of the base
    std::vector<std::string> dirs = {partial};
    for (const SweepRecipe& r : options.sweep) dirs.push_back(partial + "/" + r.name);
    for (const std::string& dir : dirs)
      if (file_exists(dir + "/config.json"))
        return make_error(dir, ": holds a copy of the base from a run without --adapter; resume it "
                          "without --adapter, or delete it");
  }
  return ok_status();
}

Result<LinearizeOutcome> linearize(const LinearizeOptions& s, Model& model, const Tokenizer& tokenizer,
                                   const Trainers& trainers) {
  // The run works in OUT.partial and renames it to OUT only when everything is written, so an
  // interrupted run never leaves a directory that looks complete.
  GL_TRY(linearize_check_output(s));
  const std::string partial = s.out + ".partial";
  for (const auto& mixer : model.mixers)
    if (mixer->kind() != "softmax") return make_error(s.base, ": already linearized; linearize its base checkpoint instead");
  LazyData data(s, model, tokenizer);
  if (s.resume && fs::exists(partial)) remove_stale_temporaries(partial);
  if (!s.sweep.empty()) return run_sweep(s, model, data, partial);
  // Killed after the result was written (linearization.json is written last) but before the
  // rename: only the last steps remain.
  if (s.resume && file_exists(partial + "/linearization.json")) {
    GL_ASSIGN_OR_RETURN(Json written, json_read_file(partial + "/linearization.json"));
    GL_TRY(finish_run(partial, s.out));
    LinearizeOutcome outcome;
    outcome.finished = true;
    const Json training = written.value("training", Json::object());
    outcome.summary = {{"out", s.out},
                       {"transfer", training.value("transfer", Json::object())},
                       {"e2e", training.value("e2e", Json::object())}};
    return outcome;
  }

  if (s.lora.enabled() && s.e2e_steps <= 0)
    return make_error("golinear linearize: LoRA is trained by the end-to-end stage only; the run has no "
                      "end-to-end steps (use --stage e2e or both with an --e2e-tokens budget)");
  if (s.lora.enabled() && !s.init.empty())
    return make_error("golinear linearize: --init takes the LoRA recipe from ", s.init, "; drop the LoRA options");
  MixerStack students;
  LoraAdapters lora;
  Json selection = Json::object();
  mixers::MixerOptions mixer_options = s.mixer;
  LayerBudgets budgets = s.budgets;
  if (!s.init.empty()) {
    GL_ASSIGN_OR_RETURN(InitialStudents init, initial_students(model, s.init, s.base));
    mixer_options = init.options;
    budgets = init.budgets;
    selection = init.selection;
    students = std::move(init.mixers);
    lora = std::move(init.lora);
  } else {
    GL_ASSIGN_OR_RETURN(FullLayers keep, choose_full_layers(model, data, s.keep_full, s.keep_full_count, s.select));
    selection = keep.selection;
    // The windows of a resumed run are the ones its first run allocated (OUT.partial keeps them).
    const std::string allocation_path = partial + "/window_allocation.json";
    if (!s.window_signal.empty() && s.resume && file_exists(allocation_path)) {
      GL_ASSIGN_OR_RETURN(Json allocation, json_read_file(allocation_path));
      GL_ASSIGN_OR_RETURN(budgets.windows, json_get<std::vector<int>>(allocation, "windows", allocation_path));
      selection["window_allocation"] = allocation;
    } else if (!s.window_signal.empty()) {
      GL_ASSIGN_OR_RETURN(Json allocation,
                          allocate_layer_windows(s, model, data, trainers, keep.layers, budgets));
      selection["window_allocation"] = allocation;
    }
    GL_ASSIGN_OR_RETURN(students, linearized_mixers(model, s.mixer, keep.layers, s.seed, budgets));
  }
  // LoRA on the linearized layers; layers kept full stay the base model's.
  if (s.lora.enabled()) { GL_ASSIGN_OR_RETURN(lora, students_lora(s, model, students)); }
  // A recipe without parameters (--mixer none --no-conv: no linear branch, no gate, no
  // convolution) has nothing to train: no teacher or student runs, the stages report 0 steps.
  long trainable = 0;
  for (mixers::Parameter* p : distillation_parameters(students, &lora)) trainable += (long)p->value.size();
  const bool train = trainable > 0;
  if (!train)
    std::fprintf(stderr, "golinear linearize: the recipe has no trainable parameters; writing it without training\n");

  if (train) GL_TRY(data.get());  // bad data fails before OUT.partial exists
  GL_ASSIGN_OR_RETURN(const std::optional<BaseReference> base_reference, base_reference_for(s, s.out));
  GL_TRY(output_prepare(s, partial));
  if (selection.contains("window_allocation"))
    GL_TRY(file_write_atomic(partial + "/window_allocation.json", selection["window_allocation"].dump()));
  TrainOptions options = transfer_options(s);
  options.state_path = partial + "/transfer_state.safetensors";
  const std::string transfer_report_path = partial + "/transfer_report.json";
  Json transfer = Json::object();
  if (!train && s.steps > 0) transfer = {{"steps", 0}, {"tokens", 0}};
  if (train && s.steps > 0) {
    bool transfer_finished_before = false;
    if (s.resume && file_exists(transfer_report_path)) {  // stage 1 finished before the interruption
      GL_ASSIGN_OR_RETURN(transfer, json_read_file(transfer_report_path));
      transfer_finished_before = true;
    }
    GL_ASSIGN_OR_RETURN(const PackedDataset* sequences, data.get());
    GL_ASSIGN_OR_RETURN(TrainReport report, trainers.transfer(model, students, *sequences, options));
    if (report.steps_done < s.steps) return stopped_at("step ", report.steps_done, s.steps);
    if (!transfer_finished_before) {
      transfer = {{"steps", s.steps}, {"tokens", s.steps * s.batch * (long)s.seq_len},
                  {"lr", s.lr}, {"final_nmse", report.final_loss},
                  {"layer_nmse", report.layer_nmse}, {"tokens_per_s", report.tokens_per_s}, {"device", s.device}};
      GL_TRY(file_write_atomic(transfer_report_path, transfer.dump()));
    }
  }
  Json e2e = Json::object();
  if (!train && s.e2e_steps > 0) e2e = {{"steps", 0}, {"tokens", 0}};
  if (train && s.e2e_steps > 0) {
    TrainOptions distill = e2e_options(s, options, s.e2e_steps);
    distill.state_path = partial + "/e2e_state.safetensors";
    GL_ASSIGN_OR_RETURN(const PackedDataset* sequences, data.get());
    GL_ASSIGN_OR_RETURN(TrainReport report, trainers.end_to_end(model, students, *sequences, distill,
                                                                lora.enabled() ? &lora : nullptr));
    if (report.steps_done < s.e2e_steps) return stopped_at("distillation step ", report.steps_done, s.e2e_steps);
    e2e = {{"steps", s.e2e_steps}, {"tokens", s.e2e_steps * s.batch * (long)s.seq_len},
           {"lr", s.e2e_lr}, {"final_kl", report.final_loss}, {"tokens_per_s", report.tokens_per_s}, {"device", s.device}};
    if (lora.enabled()) {
      long lora_parameters = 0;
      for (mixers::Parameter* p : lora.parameters()) lora_parameters += (long)p->value.size();
      e2e["lora_parameters"] = lora_parameters;
    }
  }

  MixerStack teacher_mixers = std::move(model.mixers);
  model.mixers = std::move(students);
  model.lora = std::move(lora);
  LinearizationRecipe recipe = linearization_recipe_of(model, mixer_options, budgets);
  recipe.training = {{"stage", s.stage}, {"base", s.base}, {"data", s.data}, {"batch", s.batch},
                     {"seq_len", s.seq_len}, {"seed", s.seed}, {"init", s.init},
                     {"transfer", transfer}, {"e2e", e2e}, {"keep_full_selection", selection}};
  if (!train) recipe.training["trainable_parameters"] = 0;
  recipe.base = base_reference;
  Status saved = linearization_save(model, recipe, partial);
  model.mixers = std::move(teacher_mixers);
  model.lora = LoraAdapters{};
  GL_TRY(saved);
  GL_TRY(finish_run(partial, s.out));
  LinearizeOutcome outcome;
  outcome.finished = true;
  outcome.summary = {{"out", s.out}, {"transfer", transfer}, {"e2e", e2e}};
  return outcome;
}

}  // namespace golinear::train
