#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "cli/args.h"
#include "cli/commands.h"
#include "analysis/analyze.h"
#include "analysis/diagnostics.h"
#include "cli/loading.h"
#include "common/file.h"
#include "io/checkpoint.h"
#include "model/linearization.h"
#include "train/attention_transfer.h"
#include "train/distillation.h"
#if GOLINEAR_HAVE_CUDA
#include "mixers/cuda/gpu_hybrid_layer.h"
#include "train/cuda/gpu_attention_transfer.h"
#include "train/cuda/gpu_distillation.h"
#endif

namespace golinear::cli {

namespace {

namespace fs = std::filesystem;

// "3,5,7" → {3, 5, 7}.
Result<std::vector<int>> parse_layer_list(const std::string& text) {
  std::vector<int> layers;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0)
      return make_error("golinear linearize: --keep-full-layers expects layer numbers like 0,3,7; got '", text, "'");
    layers.push_back((int)v);
  }
  return layers;
}

struct LinearizeSettings {
  std::string base, data, out;
  mixers::MixerOptions mixer;
  std::vector<int> keep_full;
  int keep_full_count = 0;        // --keep-full K: K more layers kept as softmax, chosen by
  std::string select = "hard";    // --select hard (teacher hardness) | uniform (evenly spaced)
  long tokens = 0, steps = 0;
  int seq_len = 0, batch = 1;
  float lr = 3e-3f;
  uint64_t seed = 0;
  bool resume = false;
  std::string stage = "both";
  long e2e_steps = 0;
  float e2e_lr = 1e-3f;
  std::string init;               // --init DIR: start from the new parameters of a linearized DIR
  std::string device = "cpu";     // --device cpu | cuda (both stages on the GPU)
};

Result<LinearizeSettings> parse_settings(const Args& args, const ModelConfig& config) {
  const int model_context = config.max_position_embeddings;
  LinearizeSettings s;
  s.base = args.positional()[0];
  s.data = args.get("data");
  s.out = args.get("out");
  if (s.data.empty()) return make_error("golinear linearize: --data FILE is required");
  if (s.out.empty()) return make_error("golinear linearize: --out DIR is required");
  GL_ASSIGN_OR_RETURN(s.mixer.kind, mixers::mixer_kind_parse(args.get("mixer", "gdn")));
  GL_ASSIGN_OR_RETURN(s.mixer.mix, mixers::mix_kind_parse(args.get("mix", "gate")));
  GL_ASSIGN_OR_RETURN(long sinks, args.get_int("sinks", 8, -1000000, 1000000));
  GL_ASSIGN_OR_RETURN(long window, args.get_int("window", 56, -1000000, 1000000));
  s.mixer.sinks = (int)sinks;
  s.mixer.window = (int)window;
  if (args.has("conv") && args.has("no-conv"))
    return make_error("golinear linearize: --conv and --no-conv contradict each other");
  s.mixer.conv = !args.has("no-conv");
  s.mixer.linear_rope = args.has("linear-rope");
  GL_TRY(mixers::mixer_options_validate(s.mixer));
  if (args.has("keep-full-layers")) {
    GL_ASSIGN_OR_RETURN(s.keep_full, parse_layer_list(args.get("keep-full-layers")));
  }
  GL_ASSIGN_OR_RETURN(long keep_count, args.get_int("keep-full", 0, 0, config.num_layers));
  for (int l : s.keep_full)
    if (l >= config.num_layers)
      return make_error("golinear linearize: --keep-full-layers names layer ", l, ", the model has ",
                        config.num_layers, " layers");
  s.keep_full_count = (int)keep_count;
  s.select = args.get("select", "hard");
  if (s.select != "hard" && s.select != "uniform")
    return make_error("golinear linearize: --select must be hard or uniform, got '", s.select, "'");
  GL_ASSIGN_OR_RETURN(long seq_len, args.get_int("seq-len", std::min(4096, model_context), 2, model_context));
  s.seq_len = (int)seq_len;
  GL_ASSIGN_OR_RETURN(long batch, args.get_int("batch", 1, 1, 4096));
  s.batch = (int)batch;
  if (args.has("tokens") && args.has("steps"))
    return make_error("golinear linearize: give --tokens or --steps, not both");
  GL_ASSIGN_OR_RETURN(s.tokens, args.get_int("tokens", 1000000, 1, 1L << 50));
  GL_ASSIGN_OR_RETURN(s.steps, args.get_int("steps", 0, 1, 1L << 40));
  if (!args.has("steps")) s.steps = std::max(1L, (s.tokens + (long)s.seq_len * s.batch - 1) / ((long)s.seq_len * s.batch));
  GL_ASSIGN_OR_RETURN(double lr, args.get_double("lr", 3e-3, 1e-8, 1.0));
  s.lr = (float)lr;
  GL_ASSIGN_OR_RETURN(long seed, args.get_int("seed", 0, 0, 1L << 62));
  s.seed = (uint64_t)seed;
  s.resume = args.has("resume");
  s.stage = args.get("stage", "both");
  if (s.stage != "transfer" && s.stage != "e2e" && s.stage != "both")
    return make_error("golinear linearize: --stage must be transfer, e2e or both, got '", s.stage, "'");
  // Stage 2 budget: --e2e-tokens, by default a quarter of the stage-1 budget (the recipe anchor
  // used 1 M end-to-end tokens after 4 M of attention transfer).
  const long per_step = (long)s.seq_len * s.batch;
  GL_ASSIGN_OR_RETURN(long e2e_tokens, args.get_int("e2e-tokens", s.steps * per_step / 4, 0, 1L << 50));
  s.e2e_steps = s.stage == "transfer" ? 0 : e2e_tokens / per_step;
  if (s.stage == "e2e" && s.e2e_steps == 0) s.e2e_steps = s.steps;
  if (s.stage == "both" && s.e2e_steps == 0) s.stage = "transfer";  // budget too small for stage 2
  if (s.stage == "e2e") s.steps = 0;
  GL_ASSIGN_OR_RETURN(double e2e_lr, args.get_double("e2e-lr", 1e-3, 1e-8, 1.0));
  s.e2e_lr = (float)e2e_lr;
  s.init = args.get("init");
  if (!s.init.empty() && !file_exists(s.init + "/linearization.json"))
    return make_error("golinear linearize: --init ", s.init, ": not a linearized checkpoint (no linearization.json)");
  if (!s.init.empty())
    for (const char* recipe_option : {"mixer", "mix", "sinks", "window", "conv", "no-conv", "linear-rope",
                                      "keep-full-layers", "keep-full", "select", "sweep"})
      if (args.has(recipe_option))
        return make_error("golinear linearize: --init takes the recipe from ", s.init, "; drop --", recipe_option);
  GL_ASSIGN_OR_RETURN(s.device, device_option(args, "linearize"));
#if GOLINEAR_HAVE_CUDA
  if (s.device == "cuda") {
    // Both stages run on the GPU (train/cuda: attention transfer, end-to-end distillation).
    if (args.has("sweep")) return make_error("golinear linearize: --sweep runs on the CPU only; drop --device cuda");
    if (s.init.empty())
      if (Status st = mixers::cuda::gpu_hybrid_check_recipe(s.mixer, {config.hidden_size, config.num_heads, config.num_kv_heads, config.head_dim}); !st.ok())
        return make_error("golinear linearize --device cuda: ", st.error());
  }
#endif
  return s;
}

// The attention-transfer schedule: warmup 5% of the steps (at most 100), a resume checkpoint
// every 10%. GOLINEAR_STOP_AFTER_STEPS=N stops after N steps as an interruption would (tests).
train::TrainOptions transfer_options(const LinearizeSettings& s) {
  train::TrainOptions options;
  options.steps = s.steps;
  options.batch = s.batch;
  options.lr = s.lr;
  options.warmup = std::max(1L, std::min(100L, s.steps / 20));
  options.checkpoint_every = std::max(1L, s.steps / 10);
  options.resume = s.resume;
  if (const char* stop = std::getenv("GOLINEAR_STOP_AFTER_STEPS")) options.stop_after = std::atol(stop);
  return options;
}

// --device cuda: attention transfer on the GPU (train/cuda), the teacher on the GPU too.
Result<train::TrainReport> transfer_on_gpu(const Model& model, MixerStack& students,
                                          const PackedDataset& data,
                                          const train::TrainOptions& options) {
#if GOLINEAR_HAVE_CUDA
  GL_ASSIGN_OR_RETURN(train::cuda::GpuTeacher teacher, train::cuda::gpu_teacher_from_model(model));
  return train::cuda::gpu_attention_transfer(teacher, model, students, data, options);
#else
  return make_error("golinear linearize: --device cuda needs the CUDA build");
#endif
}

// --device cuda: end-to-end distillation on the GPU (train/cuda/gpu_distillation.h).
Result<train::TrainReport> e2e_on_gpu(const Model& model, MixerStack& students,
                                     const PackedDataset& data,
                                     const train::TrainOptions& options) {
#if GOLINEAR_HAVE_CUDA
  return train::cuda::gpu_distill_end_to_end(model, students, data, options);
#else
  return make_error("golinear linearize: --device cuda needs the CUDA build");
#endif
}

// Layers kept as softmax attention: `listed`, plus K more chosen by the teacher's hardness on
// the first sequences of the training data (docs/ANALYZE.md) or evenly spaced.
struct FullLayers {
  std::vector<int> layers;
  Json selection = Json::object();
};

Result<FullLayers> choose_full_layers(const Model& model, const PackedDataset& data,
                                      const std::vector<int>& listed, int K, const std::string& select) {
  FullLayers out;
  out.layers = listed;
  if (K <= 0) return out;
  std::vector<double> hardness(model.config.num_layers, 0.0);
  if (select == "hard") {
    const long n = std::min(4L, data.size());
    GL_ASSIGN_OR_RETURN(hardness, analysis::teacher_layer_hardness(model, data.tokens.data(), n, data.seq_len, true));
  }
  auto chosen = analysis::select_full_layers(hardness, K, select);
  if (!chosen.ok()) return make_error("golinear linearize: --keep-full: ", chosen.error());
  for (int l : *chosen)
    if (std::find(out.layers.begin(), out.layers.end(), l) == out.layers.end()) out.layers.push_back(l);
  out.selection = {{"method", select}, {"k", K}, {"layers", *chosen}};
  if (select == "hard") out.selection["hardness"] = hardness;
  std::fprintf(stderr, "golinear linearize: keeping layers %s as softmax attention (%s)\n",
               Json(*chosen).dump().c_str(), select.c_str());
  return out;
}

// --init DIR: the students start from the new parameters of a linearized checkpoint DIR of the
// same base (its recipe and kept layers included), e.g. to add an end-to-end stage or more tokens
// to a finished run. `model` must hold the teacher's mixers; they are back in place on return.
struct InitialStudents {
  MixerStack mixers;
  mixers::MixerOptions options;
  Json selection;
};

Result<InitialStudents> initial_students(Model& model, const std::string& dir) {
  const std::string json_path = dir + "/linearization.json";
  GL_ASSIGN_OR_RETURN(Json json, json_read_file(json_path));
  GL_ASSIGN_OR_RETURN(LinearizationRecipe recipe, linearization_recipe_parse(json, model.config, json_path));
  InitialStudents out;
  out.options = recipe.options;
  out.selection = {{"init", dir}};
  if (recipe.training.is_object() && recipe.training.contains("keep_full_selection"))
    out.selection["init_keep_full_selection"] = recipe.training["keep_full_selection"];
  MixerStack teacher = std::move(model.mixers);
  Status applied = linearization_apply(model, dir);
  out.mixers = std::move(model.mixers);
  model.mixers = std::move(teacher);
  if (!applied.ok()) return make_error("golinear linearize: --init: ", applied.error());
  std::fprintf(stderr, "golinear linearize: starting from the new parameters of %s\n", dir.c_str());
  return out;
}

// --sweep FILE: several recipes trained by attention transfer against one teacher pass per
// sequence (DESIGN.md's ablations at the price of one teacher), each written as a complete
// linearized checkpoint OUT/<name>. FILE is a JSON list of objects: {"name", and any of "mixer",
// "mix", "sinks", "window", "conv", "linear_rope", "keep_full_layers", "keep_full", "select"};
// what an entry leaves out comes from the command line.
struct SweepRecipe {
  std::string name;
  mixers::MixerOptions options;
  std::vector<int> keep_full_layers;
  int keep_full = 0;
  std::string select;
};

Result<std::vector<SweepRecipe>> parse_sweep(const std::string& path, const LinearizeSettings& s,
                                             int num_layers) {
  GL_ASSIGN_OR_RETURN(Json json, json_read_file(path));
  if (!json.is_array() || json.empty()) return make_error(path, ": expected a non-empty JSON list of recipes");
  if (s.stage != "transfer")
    return make_error("golinear linearize: --sweep trains by attention transfer only; add --stage transfer");
  std::vector<SweepRecipe> recipes;
  for (size_t i = 0; i < json.size(); ++i) {
    const Json& row = json[i];
    const std::string what = str_cat(path, ": recipe ", i + 1);
    SweepRecipe r;
    GL_ASSIGN_OR_RETURN(r.name, json_get<std::string>(row, "name", what));
    const bool plain = !r.name.empty() && r.name[0] != '.' &&
                       std::all_of(r.name.begin(), r.name.end(), [](unsigned char c) {
                         return std::isalnum(c) || c == '-' || c == '_' || c == '.';
                       });
    if (!plain)
      return make_error(what, ": name must be a plain directory name (letters, digits, '-', '_', '.')");
    for (const SweepRecipe& other : recipes)
      if (other.name == r.name) return make_error(what, ": name '", r.name, "' is used twice");
    GL_ASSIGN_OR_RETURN(std::string kind, json_get_or<std::string>(row, "mixer", mixers::to_string(s.mixer.kind), what));
    GL_ASSIGN_OR_RETURN(std::string mix, json_get_or<std::string>(row, "mix", mixers::to_string(s.mixer.mix), what));
    GL_ASSIGN_OR_RETURN(r.options.kind, mixers::mixer_kind_parse(kind));
    GL_ASSIGN_OR_RETURN(r.options.mix, mixers::mix_kind_parse(mix));
    GL_ASSIGN_OR_RETURN(r.options.sinks, json_get_or<int>(row, "sinks", s.mixer.sinks, what));
    GL_ASSIGN_OR_RETURN(r.options.window, json_get_or<int>(row, "window", s.mixer.window, what));
    GL_ASSIGN_OR_RETURN(r.options.conv, json_get_or<bool>(row, "conv", s.mixer.conv, what));
    GL_ASSIGN_OR_RETURN(r.options.linear_rope, json_get_or<bool>(row, "linear_rope", s.mixer.linear_rope, what));
    if (Status st = mixers::mixer_options_validate(r.options); !st.ok()) return make_error(what, ": ", st.error());
    GL_ASSIGN_OR_RETURN(r.keep_full_layers, json_get_or<std::vector<int>>(row, "keep_full_layers", s.keep_full, what));
    GL_ASSIGN_OR_RETURN(r.keep_full, json_get_or<int>(row, "keep_full", s.keep_full_count, what));
    GL_ASSIGN_OR_RETURN(r.select, json_get_or<std::string>(row, "select", s.select, what));
    if (r.select != "hard" && r.select != "uniform") return make_error(what, ": select must be hard or uniform");
    if (r.keep_full < 0 || r.keep_full > num_layers) return make_error(what, ": keep_full must be in [0, ", num_layers, "]");
    for (int l : r.keep_full_layers)
      if (l < 0 || l >= num_layers) return make_error(what, ": keep_full_layers names layer ", l);
    recipes.push_back(std::move(r));
  }
  return recipes;
}

int run_sweep(const std::vector<SweepRecipe>& recipes, const LinearizeSettings& s, Model& model,
              const PackedDataset& data, const std::string& partial, const std::string& path) {
  struct Entry {
    FullLayers full;
    MixerStack students;
  };
  std::vector<Entry> entries;
  for (const SweepRecipe& r : recipes) {
    Entry e;
    auto full = choose_full_layers(model, data, r.keep_full_layers, r.keep_full, r.select);
    if (!full.ok()) return fail(path + ": recipe '" + r.name + "': " + full.error());
    e.full = std::move(*full);
    auto students = linearized_mixers(model, r.options, e.full.layers, s.seed);
    if (!students.ok()) return fail(path + ": recipe '" + r.name + "': " + students.error());
    e.students = std::move(*students);
    entries.push_back(std::move(e));
  }
  std::vector<MixerStack*> stacks;
  std::vector<std::string> states;
  for (size_t i = 0; i < recipes.size(); ++i) {
    const std::string dir = partial + "/" + recipes[i].name;
    if (Status st = checkpoint_copy_base(s.base, dir); !st.ok()) return fail(st.error());
    stacks.push_back(&entries[i].students);
    states.push_back(dir + "/transfer_state.safetensors");
  }
  train::TrainOptions options = transfer_options(s);
  auto reports = train::attention_transfer_many(model, stacks, data, options, states);
  if (!reports.ok()) return fail(reports.error());
  if ((*reports)[0].steps_done < s.steps) {
    std::fprintf(stderr, "golinear linearize: stopped after step %ld of %ld; resume with --resume\n",
                 (*reports)[0].steps_done, s.steps);
    return 3;
  }
  Json summary = Json::array();
  MixerStack teacher_mixers = std::move(model.mixers);
  for (size_t i = 0; i < recipes.size(); ++i) {
    const train::TrainReport& report = (*reports)[i];
    model.mixers = std::move(entries[i].students);
    LinearizationRecipe recipe = linearization_recipe_of(model, recipes[i].options);
    Json transfer = {{"steps", s.steps}, {"tokens", s.steps * s.batch * (long)s.seq_len},
                     {"lr", s.lr}, {"final_nmse", report.final_loss},
                     {"layer_nmse", report.layer_nmse}, {"tokens_per_s", report.tokens_per_s}};
    recipe.training = {{"stage", "transfer"}, {"data", s.data}, {"batch", s.batch},
                       {"seq_len", s.seq_len}, {"seed", s.seed}, {"sweep", path},
                       {"transfer", transfer}, {"e2e", Json::object()},
                       {"keep_full_selection", entries[i].full.selection}};
    const std::string dir = partial + "/" + recipes[i].name;
    if (Status st = linearization_save(model, recipe, dir); !st.ok()) return fail(st.error());
    std::error_code ignored;
    fs::remove(dir + "/transfer_state.safetensors", ignored);
    summary.push_back({{"name", recipes[i].name}, {"transfer", transfer}});
  }
  model.mixers = std::move(teacher_mixers);
  std::error_code ec;
  fs::rename(partial, s.out, ec);
  if (ec) return fail(s.out + ": cannot move the finished run into place (" + ec.message() + ")");
  std::printf("%s\n", Json({{"out", s.out}, {"recipes", summary}}).dump().c_str());
  return 0;
}

}  // namespace

int cmd_linearize(const Argv& argv) {
  auto args = Args::parse("linearize", argv,
                          {{"data", true}, {"out", true}, {"mixer", true}, {"mix", true},
                           {"sinks", true}, {"window", true}, {"conv", false}, {"no-conv", false},
                           {"linear-rope", false}, {"keep-full-layers", true}, {"tokens", true},
                           {"steps", true}, {"seq-len", true}, {"batch", true}, {"lr", true},
                           {"seed", true}, {"device", true}, {"resume", false}, {"stage", true},
                           {"e2e-tokens", true}, {"e2e-lr", true}, {"keep-full", true},
                           {"select", true}, {"sweep", true}, {"init", true}},
                          1, 1);
  if (!args.ok()) return fail(args.error());
  auto config = model_config_read(args->positional()[0] + "/config.json");
  if (!config.ok()) return fail(config.error());
  auto parsed = parse_settings(*args, *config);
  if (!parsed.ok()) return fail(parsed.error());
  const LinearizeSettings& s = *parsed;
  std::vector<SweepRecipe> sweep;
  if (args->has("sweep")) {
    auto recipes = parse_sweep(args->get("sweep"), s, config->num_layers);
    if (!recipes.ok()) return fail(recipes.error());
    sweep = std::move(*recipes);
  }

  // The run works in OUT.partial and renames it to OUT only when everything is written, so an
  // interrupted run never leaves a directory that looks complete.
  const std::string partial = s.out + ".partial";
  std::error_code ec;
  if (fs::exists(s.out, ec)) return fail(s.out + ": already exists; choose another --out");
  if (fs::exists(partial, ec) && !s.resume)
    return fail(partial + ": an interrupted run is there; pass --resume to continue it or delete it");

  auto loaded = load_model_and_tokenizer(s.base);
  if (!loaded.ok()) return fail(loaded.error());
  Model& model = *loaded->model;
  for (const auto& mixer : model.mixers)
    if (mixer->kind() != "softmax")
      return fail(s.base + ": already linearized; linearize its base checkpoint instead");
  const int bos = loaded->tokenizer.bos_id().value_or(model.config.bos_token_id);
  const int eos = model.config.eos_token_ids.empty() ? -1 : model.config.eos_token_ids[0];
  DatasetOptions data_options;
  data_options.seq_len = s.seq_len;
  data_options.max_sequences = std::max(s.steps, s.e2e_steps) * s.batch;
  data_options.seed = s.seed;
  std::fprintf(stderr, "golinear linearize: tokenizing %s\n", s.data.c_str());
  const Tokenizer& tokenizer = loaded->tokenizer;
  auto data = dataset_build(
      s.data, [&tokenizer](const std::string& text) { return tokenizer.encode(text, /*add_special=*/false); },
      bos, eos, data_options);
  if (!data.ok()) return fail(data.error());
  if (data->size() < std::max(s.steps, s.e2e_steps) * s.batch)
    std::fprintf(stderr, "golinear linearize: %s holds %ld sequences of %d tokens; %ld steps × %d "
                 "will revisit them\n", s.data.c_str(), data->size(), s.seq_len, s.steps, s.batch);

  if (!sweep.empty()) return run_sweep(sweep, s, model, *data, partial, args->get("sweep"));
  Result<MixerStack> students = make_error("no students");
  Json selection = Json::object();
  mixers::MixerOptions mixer_options = s.mixer;
  if (!s.init.empty()) {
    auto init = initial_students(model, s.init);
    if (!init.ok()) return fail(init.error());
    mixer_options = init->options;
    selection = init->selection;
    students = std::move(init->mixers);
  } else {
    auto keep = choose_full_layers(model, *data, s.keep_full, s.keep_full_count, s.select);
    if (!keep.ok()) return fail(keep.error());
    selection = keep->selection;
    students = linearized_mixers(model, s.mixer, keep->layers, s.seed);
    if (!students.ok()) return fail(students.error());
  }

  if (Status st = checkpoint_copy_base(s.base, partial); !st.ok()) return fail(st.error());
  train::TrainOptions options = transfer_options(s);
  options.state_path = partial + "/transfer_state.safetensors";
  const std::string transfer_report_path = partial + "/transfer_report.json";
  Json transfer = Json::object();
  bool transfer_finished_before = false;
  if (s.steps > 0) {
    if (s.resume && file_exists(transfer_report_path)) {  // stage 1 finished before the interruption
      auto saved = json_read_file(transfer_report_path);
      if (!saved.ok()) return fail(saved.error());
      transfer = *saved;
      transfer_finished_before = true;
    }
    auto report = s.device == "cuda" ? transfer_on_gpu(model, *students, *data, options)
                                     : train::attention_transfer(model, *students, *data, options);
    if (!report.ok()) return fail(report.error());
    if (report->steps_done < s.steps) {
      std::fprintf(stderr, "golinear linearize: stopped after step %ld of %ld; resume with --resume\n",
                   report->steps_done, s.steps);
      return 3;
    }
    if (!transfer_finished_before) {
      transfer = {{"steps", s.steps}, {"tokens", s.steps * s.batch * (long)s.seq_len},
                  {"lr", s.lr}, {"final_nmse", report->final_loss},
                  {"layer_nmse", report->layer_nmse}, {"tokens_per_s", report->tokens_per_s}, {"device", s.device}};
      if (Status st = file_write_atomic(transfer_report_path, transfer.dump()); !st.ok()) return fail(st.error());
    }
  }
  Json e2e = Json::object();
  if (s.e2e_steps > 0) {
    train::TrainOptions e2e_options = options;
    e2e_options.steps = s.e2e_steps;
    e2e_options.lr = s.e2e_lr;
    e2e_options.warmup = std::max(1L, std::min(50L, s.e2e_steps / 20));
    e2e_options.checkpoint_every = std::max(1L, s.e2e_steps / 10);
    e2e_options.state_path = partial + "/e2e_state.safetensors";
    auto report = s.device == "cuda" ? e2e_on_gpu(model, *students, *data, e2e_options)
                                     : train::distill_end_to_end(model, *students, *data, e2e_options);
    if (!report.ok()) return fail(report.error());
    if (report->steps_done < s.e2e_steps) {
      std::fprintf(stderr, "golinear linearize: stopped after distillation step %ld of %ld; resume with --resume\n",
                   report->steps_done, s.e2e_steps);
      return 3;
    }
    e2e = {{"steps", s.e2e_steps}, {"tokens", s.e2e_steps * s.batch * (long)s.seq_len},
           {"lr", s.e2e_lr}, {"final_kl", report->final_loss}, {"tokens_per_s", report->tokens_per_s}, {"device", s.device}};
  }

  model.mixers = std::move(*students);
  LinearizationRecipe recipe = linearization_recipe_of(model, mixer_options);
  recipe.training = {{"stage", s.stage}, {"data", s.data}, {"batch", s.batch},
                     {"seq_len", s.seq_len}, {"seed", s.seed}, {"init", s.init},
                     {"transfer", transfer}, {"e2e", e2e}, {"keep_full_selection", selection}};
  if (Status st = linearization_save(model, recipe, partial); !st.ok()) return fail(st.error());
  for (const char* name : {"transfer_state.safetensors", "e2e_state.safetensors", "transfer_report.json"})
    fs::remove(partial + "/" + name, ec);
  ec.clear();
  fs::rename(partial, s.out, ec);
  if (ec) return fail(s.out + ": cannot move the finished run into place (" + ec.message() + ")");
  Json summary = {{"out", s.out}, {"transfer", transfer}, {"e2e", e2e}};
  std::printf("%s\n", summary.dump().c_str());
  return 0;
}

}  // namespace golinear::cli
