#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/loading.h"
#include "common/file.h"
#include "train/exact_budget.h"
#include "train/linearize.h"
#if GOLINEAR_HAVE_CUDA
#include "analysis/cuda/analyze.h"
#include "mixers/cuda/hybrid_mixer.h"
#include "train/cuda/gpu_attention_transfer.h"
#include "train/cuda/gpu_distillation.h"
#endif

namespace golinear::cli {

namespace {

// --select: the teacher's hardness, evenly spaced, or an analysis's summary.json (sensitivity).
bool select_is_valid(const std::string& select) {
  return select == "hard" || select == "uniform" ||
         (train::is_analysis_summary(select) && file_exists(select));
}

// The integers of a list option as ints.
Result<std::vector<int>> int_list(const Args& args, const std::string& name, long lo, long hi) {
  GL_ASSIGN_OR_RETURN(std::vector<long> values, args.get_int_list(name, lo, hi));
  return std::vector<int>(values.begin(), values.end());
}

// --sinks / --window: one number for every layer, or one per layer ("72,8,48,…": per-layer
// budgets into `per_layer`, the recipe's uniform value then their mean, rounded down).
Result<int> parse_budget(const Args& args, const std::string& name, int fallback, int num_layers,
                         std::vector<int>& per_layer) {
  if (args.get(name).find(',') == std::string::npos) {
    GL_ASSIGN_OR_RETURN(long v, args.get_int(name, fallback, -1000000, 1000000));
    return (int)v;
  }
  GL_ASSIGN_OR_RETURN(per_layer, int_list(args, name, 0, mixers::kMaxExactKeys));
  if ((int)per_layer.size() != num_layers)
    return make_error("golinear linearize: --", name, " lists ", per_layer.size(),
                      " values, the model has ", num_layers, " layers");
  long sum = 0;
  for (int v : per_layer) sum += v;
  return (int)(sum / num_layers);
}

Result<train::LinearizeOptions> parse_settings(const Args& args, const ModelConfig& config) {
  const int model_context = config.max_position_embeddings;
  train::LinearizeOptions s;
  s.base = args.positional()[0];
  s.data = args.get("data");
  s.out = args.get("out");
  if (s.data.empty()) return make_error("golinear linearize: --data FILE is required");
  if (s.out.empty()) return make_error("golinear linearize: --out DIR is required");
  GL_ASSIGN_OR_RETURN(s.mixer.kind, mixers::mixer_kind_parse(args.get("mixer", "gdn")));
  GL_ASSIGN_OR_RETURN(s.mixer.mix, mixers::mix_kind_parse(args.get("mix", "split")));
  GL_ASSIGN_OR_RETURN(s.mixer.sinks, parse_budget(args, "sinks", 8, config.num_layers, s.budgets.sinks));
  GL_ASSIGN_OR_RETURN(s.mixer.window, parse_budget(args, "window", 56, config.num_layers, s.budgets.windows));
  if (args.has("window-by")) {
    s.window_signal = args.get("window-by");
    if (!s.budgets.windows.empty())
      return make_error("golinear linearize: --window-by allocates the windows; give --window one number (the mean)");
    if (s.window_signal != "sensitivity" && s.window_signal != "probe" && s.window_signal != "hardness" &&
        s.window_signal != "none" &&
        !file_exists(s.window_signal + "/linearization.json") &&
        !(train::is_analysis_summary(s.window_signal) && file_exists(s.window_signal)))
      return make_error("golinear linearize: --window-by must be 'sensitivity', 'probe', 'hardness', 'none', a "
                        "linearized directory (its per-layer transfer NMSE) or an analysis's "
                        "summary.json (its student's layer sensitivity), got '", s.window_signal, "'");
  }
  if (args.has("conv") && args.has("no-conv"))
    return make_error("golinear linearize: --conv and --no-conv contradict each other");
  s.mixer.conv = !args.has("no-conv");
  s.mixer.linear_rope = args.has("linear-rope");
  GL_TRY(mixers::mixer_options_validate(s.mixer));
  if (Status st = layer_budgets_validate(s.mixer, s.budgets, config.num_layers); !st.ok())
    return make_error("golinear linearize: ", st.error());
  if (args.has("keep-full-layers")) {
    GL_ASSIGN_OR_RETURN(s.keep_full, int_list(args, "keep-full-layers", 0, 1 << 20));
  }
  GL_ASSIGN_OR_RETURN(long keep_count, args.get_int("keep-full", 0, 0, config.num_layers));
  for (int l : s.keep_full)
    if (l >= config.num_layers)
      return make_error("golinear linearize: --keep-full-layers names layer ", l, ", the model has ",
                        config.num_layers, " layers");
  s.keep_full_count = (int)keep_count;
  s.select = args.get("select", "hard");
  if (!select_is_valid(s.select))
    return make_error("golinear linearize: --select must be hard, uniform or an analysis's "
                      "summary.json (its student's layer sensitivity), got '", s.select, "'");
  GL_ASSIGN_OR_RETURN(long seq_len, args.get_int("seq-len", std::min(4096, model_context), 2, model_context));
  s.seq_len = (int)seq_len;
  GL_ASSIGN_OR_RETURN(long batch, args.get_int("batch", 1, 1, 4096));
  s.batch = (int)batch;
  if (args.has("tokens") && args.has("steps"))
    return make_error("golinear linearize: give --tokens or --steps, not both");
  GL_ASSIGN_OR_RETURN(const long tokens, args.get_int("tokens", 1000000, 1, 1L << 50));
  GL_ASSIGN_OR_RETURN(s.steps, args.get_int("steps", 0, 1, 1L << 40));
  if (!args.has("steps")) s.steps = std::max(1L, (tokens + (long)s.seq_len * s.batch - 1) / ((long)s.seq_len * s.batch));
  GL_ASSIGN_OR_RETURN(double lr, args.get_double("lr", 3e-3, 1e-8, 1.0));
  s.lr = (float)lr;
  GL_ASSIGN_OR_RETURN(long seed, args.get_int("seed", 0, 0, 1L << 62));
  s.seed = (uint64_t)seed;
  s.resume = args.has("resume");
  // --adapter: OUT holds only the new parameters and the recipe, naming the base (as PEFT's
  // adapters do); every command loads it with the base's weights.
  s.adapter = args.has("adapter");
  // --stop-after N: stop after N steps of a stage as an interruption would (for testing resume).
  GL_ASSIGN_OR_RETURN(s.stop_after, args.get_int("stop-after", 0, 1, 1L << 40));
  // --inject-nan STEP,LAYER: a NaN gradient in LAYER at STEP of each stage (for testing the stop).
  if (args.has("inject-nan")) {
    long step = 0;
    int layer = -1, used = 0;
    const std::string text = args.get("inject-nan");
    if (std::sscanf(text.c_str(), "%ld,%d%n", &step, &layer, &used) != 2 || used != (int)text.size() ||
        step < 1 || layer < 0 || layer >= config.num_layers)
      return make_error("golinear linearize: --inject-nan expects STEP,LAYER (STEP ≥ 1, 0 ≤ LAYER < ",
                        config.num_layers, "), got '", text, "'");
    s.nan_fault = {step, layer};
  }
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
  // LoRA on q/k/v/o of the linearized layers (model/lora.h), trained by the end-to-end stage:
  // rank 8 in the default recipe whenever there is an end-to-end stage and a linear state
  // (docs/RESULTS.md §2c; not for the `none` baseline); --lora-rank 0 leaves it out.
  if (!args.has("lora-rank") && (args.has("lora-alpha") || args.has("lora-targets")))
    return make_error("golinear linearize: --lora-alpha and --lora-targets need --lora-rank R");
  const bool lora_default = !args.has("lora-rank") && s.e2e_steps > 0 && !args.has("init") &&
                            !args.has("sweep") && s.mixer.kind != mixers::MixerKind::none;
  GL_ASSIGN_OR_RETURN(const long lora_rank, args.get_int("lora-rank", lora_default ? 8 : 0, 0, 64));
  if (lora_rank == 0 && (args.has("lora-alpha") || args.has("lora-targets")))
    return make_error("golinear linearize: --lora-alpha and --lora-targets need --lora-rank R > 0");
  if (lora_rank > 0) {
    const long rank = lora_rank;
    s.lora.rank = (int)rank;
    GL_ASSIGN_OR_RETURN(double alpha, args.get_double("lora-alpha", (double)rank, 1e-6, 1e6));
    s.lora.alpha = (float)alpha;
    if (args.has("lora-targets")) { GL_ASSIGN_OR_RETURN(s.lora.targets, lora_targets_parse(args.get("lora-targets"))); }
    if (Status st = lora_options_validate(s.lora); !st.ok()) return make_error("golinear linearize: ", st.error());
    if (s.e2e_steps == 0)
      return make_error("golinear linearize: --lora-rank trains LoRA in the end-to-end stage, which this run "
                        "does not have (--stage ", args.get("stage", "both"), "); use --stage both or e2e "
                        "with an --e2e-tokens budget of at least one step");
  }
  s.init = args.get("init");
  if (!s.init.empty() && !file_exists(s.init + "/linearization.json"))
    return make_error("golinear linearize: --init ", s.init, ": not a linearized checkpoint (no linearization.json)");
  if (!s.init.empty())
    for (const char* recipe_option : {"mixer", "mix", "sinks", "window", "window-by", "conv", "no-conv",
                                      "linear-rope", "keep-full-layers", "keep-full", "select", "sweep",
                                      "lora-rank", "lora-alpha", "lora-targets"})
      if (args.has(recipe_option))
        return make_error("golinear linearize: --init takes the recipe from ", s.init, "; drop --", recipe_option);
  // The default recipe allocates the windows by a probe's layer sensitivity (docs/RESULTS.md §2e)
  // when there is a transfer stage to probe with, a uniform window to allocate and a linear state
  // to probe; --window-by none keeps them uniform.
  if (!args.has("window-by") && s.budgets.windows.empty() && s.init.empty() && !args.has("sweep") &&
      s.steps > 0 && s.mixer.window > 0 && s.mixer.kind != mixers::MixerKind::none)
    s.window_signal = "sensitivity";
  if (s.window_signal == "none") s.window_signal.clear();
  GL_ASSIGN_OR_RETURN(s.device, device_option(args, "linearize"));
#if GOLINEAR_HAVE_CUDA
  if (s.device == "cuda") {
    // Both stages run on the GPU (train/cuda: attention transfer, end-to-end distillation).
    if (args.has("sweep")) return make_error("golinear linearize: --sweep runs on the CPU only; drop --device cuda");
    for (int l = 0; l < config.num_layers && s.init.empty(); ++l)
      if (Status st = mixers::cuda::hybrid_check_recipe(
              layer_mixer_options(s.mixer, s.budgets, l),
              {config.hidden_size, config.num_heads, config.num_kv_heads, config.head_dim});
          !st.ok())
        return make_error("golinear linearize --device cuda: ", st.error());
  }
#endif
  return s;
}

// --device cuda: both stages on the GPU (train/cuda) against one teacher on the GPU, shared by
// the stages and the probe's layer sensitivity (analysis/cuda/analyze.h): loaded straight from
// the checkpoint in bf16 (no host copy of the weights), or uploaded once from the host model when
// that is loaded anyway (--keep-full K and --window-by hardness compute the layers' hardness with
// the CPU teacher).
Result<train::Trainers> gpu_trainers(LoadedModel& loaded) {
#if GOLINEAR_HAVE_CUDA
  if (!loaded.gpu) {
    GL_ASSIGN_OR_RETURN(loaded.gpu, golinear::model::cuda::gpu_model_upload(*loaded.model));
  }
  std::shared_ptr<golinear::model::cuda::GpuModel> gpu = loaded.gpu;
  train::Trainers t;
  t.transfer = [gpu](const Model& model, MixerStack& students, const PackedDataset& data,
                     const train::TrainOptions& options) -> Result<train::TrainReport> {
    return train::cuda::gpu_attention_transfer(train::cuda::gpu_teacher_from_gpu_model(gpu), model,
                                               students, data, options);
  };
  t.end_to_end = [gpu](Model& model, MixerStack& students, const PackedDataset& data,
                       const train::TrainOptions& options, LoraAdapters* lora) -> Result<train::TrainReport> {
    return train::cuda::gpu_distill_end_to_end(model, students, data, options, gpu, lora);
  };
  t.layer_sensitivity = [gpu](Model&, MixerStack& student, const int32_t* tokens, long N,
                              int T) -> Result<std::vector<double>> {
    return analysis::cuda::layer_sensitivity(*gpu, student, tokens, N, T);
  };
  t.device = "cuda";
  return t;
#else
  (void)loaded;
  return make_error("golinear linearize: --device cuda needs the CUDA build");
#endif
}

// --sweep FILE: several recipes trained by attention transfer against one teacher pass per
// sequence (DESIGN.md's ablations at the price of one teacher), each written as a complete
// linearized checkpoint OUT/<name>. FILE is a JSON list of objects: {"name", and any of "mixer",
// "mix", "sinks", "window", "conv", "linear_rope", "keep_full_layers", "keep_full", "select"};
// what an entry leaves out comes from the command line.
Result<std::vector<train::SweepRecipe>> parse_sweep(const std::string& path, const train::LinearizeOptions& s,
                                             int num_layers) {
  GL_ASSIGN_OR_RETURN(Json json, json_read_file(path));
  if (!json.is_array() || json.empty()) return make_error(path, ": expected a non-empty JSON list of recipes");
  if (s.stage != "transfer")
    return make_error("golinear linearize: --sweep trains by attention transfer only; add --stage transfer");
  std::vector<train::SweepRecipe> recipes;
  for (size_t i = 0; i < json.size(); ++i) {
    const Json& row = json[i];
    const std::string what = str_cat(path, ": recipe ", i + 1);
    train::SweepRecipe r;
    GL_ASSIGN_OR_RETURN(r.name, json_get<std::string>(row, "name", what));
    const bool plain = !r.name.empty() && r.name[0] != '.' &&
                       std::all_of(r.name.begin(), r.name.end(), [](unsigned char c) {
                         return std::isalnum(c) || c == '-' || c == '_' || c == '.';
                       });
    if (!plain)
      return make_error(what, ": name must be a plain directory name (letters, digits, '-', '_', '.')");
    for (const train::SweepRecipe& other : recipes)
      if (other.name == r.name) return make_error(what, ": name '", r.name, "' is used twice");
    GL_ASSIGN_OR_RETURN(std::string kind, json_get_or<std::string>(row, "mixer", mixers::to_string(s.mixer.kind), what));
    GL_ASSIGN_OR_RETURN(std::string mix, json_get_or<std::string>(row, "mix", mixers::to_string(s.mixer.mix), what));
    GL_ASSIGN_OR_RETURN(r.options.kind, mixers::mixer_kind_parse(kind));
    GL_ASSIGN_OR_RETURN(r.options.mix, mixers::mix_kind_parse(mix));
    GL_ASSIGN_OR_RETURN(r.options.sinks, json_get_or<int>(row, "sinks", s.mixer.sinks, what));
    r.budgets = s.budgets;
    if (row.is_object() && row.contains("window") && row["window"].is_array()) {
      GL_ASSIGN_OR_RETURN(r.budgets.windows, json_get<std::vector<int>>(row, "window", what));
      long sum = 0;
      for (int w : r.budgets.windows) sum += w;
      r.options.window = r.budgets.windows.empty() ? 0 : (int)(sum / (long)r.budgets.windows.size());
    } else {
      GL_ASSIGN_OR_RETURN(r.options.window, json_get_or<int>(row, "window", s.mixer.window, what));
      if (row.is_object() && row.contains("window")) r.budgets.windows.clear();
    }
    GL_ASSIGN_OR_RETURN(r.options.conv, json_get_or<bool>(row, "conv", s.mixer.conv, what));
    GL_ASSIGN_OR_RETURN(r.options.linear_rope, json_get_or<bool>(row, "linear_rope", s.mixer.linear_rope, what));
    if (Status st = mixers::mixer_options_validate(r.options); !st.ok()) return make_error(what, ": ", st.error());
    if (Status st = layer_budgets_validate(r.options, r.budgets, num_layers); !st.ok())
      return make_error(what, ": ", st.error());
    GL_ASSIGN_OR_RETURN(r.keep_full_layers, json_get_or<std::vector<int>>(row, "keep_full_layers", s.keep_full, what));
    GL_ASSIGN_OR_RETURN(r.keep_full, json_get_or<int>(row, "keep_full", s.keep_full_count, what));
    GL_ASSIGN_OR_RETURN(r.select, json_get_or<std::string>(row, "select", s.select, what));
    if (!select_is_valid(r.select))
      return make_error(what, ": select must be hard, uniform or an analysis's summary.json");
    if (r.keep_full < 0 || r.keep_full > num_layers) return make_error(what, ": keep_full must be in [0, ", num_layers, "]");
    for (int l : r.keep_full_layers)
      if (l < 0 || l >= num_layers) return make_error(what, ": keep_full_layers names layer ", l);
    recipes.push_back(std::move(r));
  }
  return recipes;
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
                           {"select", true}, {"sweep", true}, {"init", true}, {"stop-after", true},
                           {"window-by", true}, {"adapter", false}, {"lora-rank", true},
                           {"lora-alpha", true}, {"lora-targets", true}, {"inject-nan", true}},
                          1, 1);
  if (!args.ok()) return fail(args.error());
  auto config = load_model_config(args->positional()[0]);
  if (!config.ok()) return fail(config.error());
  auto parsed = parse_settings(*args, *config);
  if (!parsed.ok()) return fail(parsed.error());
  train::LinearizeOptions& s = *parsed;
  if (args->has("sweep")) {
    s.sweep_path = args->get("sweep");
    auto recipes = parse_sweep(s.sweep_path, s, config->num_layers);
    if (!recipes.ok()) return fail(recipes.error());
    s.sweep = std::move(*recipes);
  }
  if (Status st = train::linearize_check_output(s); !st.ok()) return fail(st.error());
  // --device cuda loads the weights straight to the GPU, unless the CPU teacher is needed.
  const bool host_weights = s.device == "cpu" || s.keep_full_count > 0 || s.window_signal == "hardness";
  auto loaded = load_model_and_tokenizer(s.base, host_weights ? "cpu" : s.device, "linearize");
  if (!loaded.ok()) return fail(loaded.error());
  train::Trainers trainers = train::cpu_trainers();
  if (s.device == "cuda") {
    auto on_gpu = gpu_trainers(*loaded);
    if (!on_gpu.ok()) return fail(on_gpu.error());
    trainers = std::move(*on_gpu);
  }
  auto outcome = train::linearize(s, *loaded->model, loaded->tokenizer, trainers);
  if (!outcome.ok()) return fail(outcome.error());
  if (s.device == "cuda") memory_report(*loaded, "linearize");
  if (!outcome->finished) {
    std::fprintf(stderr, "golinear linearize: %s\n", outcome->stopped.c_str());
    return 3;
  }
  std::printf("%s\n", outcome->summary.dump().c_str());
  return 0;
}

}  // namespace golinear::cli
