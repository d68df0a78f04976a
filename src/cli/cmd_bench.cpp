// golinear bench: the GPU benchmarks of src/bench/cuda; the options are parsed here.
//   golinear bench [--mixers] [mixer options]      the mixer table of ANCHORS.md
//                                                  (bench/cuda/mixer_bench.h)
//   golinear bench --config FILE.json | --model DIR [model options]
//                                                  the whole-model table (bench/cuda/model_bench.h)
//   golinear bench --transfer --config FILE.json [transfer options]
//                                                  attention-transfer throughput
//                                                  (bench/cuda/transfer_bench.h)
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "cli/commands.h"
#ifdef GOLINEAR_HAVE_CUDA
#include "bench/cuda/mixer_bench.h"
#include "bench/cuda/model_bench.h"
#include "bench/cuda/transfer_bench.h"
#endif
#include "cli/args.h"

namespace golinear::cli {

namespace {


#ifdef GOLINEAR_HAVE_CUDA
std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

// The comma-separated integers of option `name`, each in [lo, hi], into `out` (kept when absent).
template <class T>
Status parse_list(const Args& args, const std::string& name, long lo, long hi,
                  std::vector<T>& out) {
  if (!args.has(name)) return ok_status();
  GL_ASSIGN_OR_RETURN(std::vector<long> values, args.get_int_list(name, lo, hi));
  out.assign(values.begin(), values.end());
  return ok_status();
}

int bench_mixers(const Argv& argv) {
  auto args = Args::parse("bench", argv,
                          {{"mixers", false}, {"json", false}, {"no-backward", false}, {"seq", true},
                           {"contexts", true}, {"repeats", true}, {"warmups", true},
                           {"value-block", true}, {"gdn-segments", true}, {"gdn-wait-groups", true},
                           {"gdn-persistent", true},
                           {"heads", true}, {"kv-heads", true}, {"head-dim", true},
                           {"hidden", true}, {"mix", true}},
                          0, 0);
  if (!args.ok()) return fail(args.error());
  bench::cuda::MixerBenchOptions o;
  if (args->has("mix")) {
    auto mix = mixers::mix_kind_parse(args->get("mix"));
    if (!mix.ok()) return fail("golinear bench: " + mix.error());
    o.mix = *mix;
  }
  o.json = args->has("json");
  o.backward = !args->has("no-backward");
  if (auto st = parse_list(*args, "seq", 1, 1 << 24, o.seq_lens); !st.ok()) return fail(st.error());
  if (auto st = parse_list(*args, "contexts", 1, 1L << 31, o.contexts); !st.ok())
    return fail(st.error());
  auto repeats = args->get_int("repeats", o.repeats, 1, 1000000);
  auto warmups = args->get_int("warmups", o.warmups, 0, 1000000);
  auto value_block = args->get_int("value-block", o.value_block, 0, 128);
  auto segments = args->get_int("gdn-segments", o.gdn.segments, 0, 64);
  auto wait_groups = args->get_int("gdn-wait-groups", o.gdn.wait_groups, 0, 64);
  auto heads = args->get_int("heads", o.H, 1, 1024);
  auto kv_heads = args->get_int("kv-heads", o.G, 1, 1024);
  auto head_dim = args->get_int("head-dim", o.D, 1, 1024);
  auto hidden = args->get_int("hidden", o.C, 1, 1 << 20);
  for (const auto* r : {&repeats, &warmups, &value_block, &segments, &wait_groups, &heads,
                        &kv_heads, &head_dim, &hidden})
    if (!r->ok()) return fail(r->error());
  o.repeats = (int)*repeats;
  o.warmups = (int)*warmups;
  o.value_block = (int)*value_block;
  o.gdn.segments = (int)*segments;
  o.gdn.wait_groups = (int)*wait_groups;
  o.H = (int)*heads;
  o.G = (int)*kv_heads;
  o.D = (int)*head_dim;
  o.C = (int)*hidden;
  if (o.H % o.G != 0) return fail("golinear bench: --kv-heads must divide --heads");
  const std::string persistent = args->get("gdn-persistent", "auto");
  if (persistent == "auto") o.gdn.persistent = kernels::cuda::GatedDeltaPersistent::automatic;
  else if (persistent == "never") o.gdn.persistent = kernels::cuda::GatedDeltaPersistent::never;
  else if (persistent == "always") o.gdn.persistent = kernels::cuda::GatedDeltaPersistent::always;
  else return fail("golinear bench: --gdn-persistent " + persistent + " (auto, never, always)");
  auto table = bench::cuda::mixer_bench_run(o);
  if (!table.ok()) return fail(table.error());
  std::fputs(table->c_str(), stdout);
  return 0;
}

int bench_model(const Argv& argv) {
  auto args = Args::parse("bench", argv,
                          {{"config", true}, {"model", true}, {"contexts", true}, {"variants", true},
                           {"full-prefill-max", true}, {"prefill-max", true}, {"repeats", true},
                           {"warmups", true}, {"decode-repeats", true}, {"sinks", true},
                           {"window", true}, {"seed", true}, {"json", false}, {"json-file", true},
                           {"batches", true}},
                          0, 0);
  if (!args.ok()) return fail(args.error());
  bench::cuda::ModelBenchOptions o;
  o.config_path = args->get("config");
  o.model_dir = args->get("model");
  if (o.config_path.empty() == o.model_dir.empty())
    return fail("golinear bench: give exactly one of --config FILE.json and --model DIR");
  o.json = args->has("json");
  o.json_file = args->get("json-file");
  if (auto st = parse_list(*args, "contexts", 1, 0x7fffffffL, o.contexts); !st.ok())
    return fail(st.error());
  if (args->has("batches")) {
    auto batches = args->get_int_list("batches", 1, 4096);
    if (!batches.ok()) return fail(batches.error());
    for (long b : *batches) o.batches.push_back((int)b);
  }
  if (args->has("variants")) o.variants = split_commas(args->get("variants"));
  for (const auto& v : o.variants)
    if (v != "hybrid" && v != "full")
      return fail("golinear bench: unknown variant '" + v + "' (hybrid, full)");
  auto full_prefill_max = args->get_int("full-prefill-max", o.full_prefill_max, 0, 1L << 40);
  auto prefill_max = args->get_int("prefill-max", o.prefill_max, 0, 1L << 40);
  auto repeats = args->get_int("repeats", o.repeats, 1, 1000000);
  auto warmups = args->get_int("warmups", o.warmups, 0, 1000000);
  auto decode_repeats = args->get_int("decode-repeats", o.decode_repeats, 1, 1000000);
  auto sinks = args->get_int("sinks", o.sinks, 0, 4096);
  auto window = args->get_int("window", o.window, 0, 4096);
  auto seed = args->get_int("seed", (long)o.seed, 0, 1L << 62);
  for (const auto* r : {&full_prefill_max, &prefill_max, &repeats, &warmups, &decode_repeats,
                        &sinks, &window, &seed})
    if (!r->ok()) return fail(r->error());
  o.full_prefill_max = *full_prefill_max;
  o.prefill_max = *prefill_max;
  o.repeats = (int)*repeats;
  o.warmups = (int)*warmups;
  o.decode_repeats = (int)*decode_repeats;
  o.sinks = (int)*sinks;
  o.window = (int)*window;
  o.seed = (uint64_t)*seed;
  auto table = bench::cuda::model_bench_run(o);
  if (!table.ok()) return fail(table.error());
  std::fputs(table->c_str(), stdout);
  return 0;
}

int bench_transfer(const Argv& argv) {
  auto args = Args::parse("bench", argv,
                          {{"transfer", false}, {"config", true}, {"seq-len", true}, {"batch", true},
                           {"steps", true}, {"sinks", true}, {"window", true}, {"seed", true},
                           {"json", false}, {"profile", false}, {"no-pipeline", false}},
                          0, 0);
  if (!args.ok()) return fail(args.error());
  if (!args->has("config")) return fail("golinear bench --transfer: --config FILE.json is required");
  bench::cuda::TransferBenchOptions o;
  o.config_path = args->get("config");
  auto seq_len = args->get_int("seq-len", 4096, 2, 1 << 20);
  auto batch = args->get_int("batch", 1, 1, 1024);
  auto steps = args->get_int("steps", 20, 1, 1000000);
  auto sinks = args->get_int("sinks", 8, 0, 4096);
  auto window = args->get_int("window", 56, 0, 4096);
  auto seed = args->get_int("seed", 0, 0, 1L << 62);
  for (const auto* r : {&seq_len, &batch, &steps, &sinks, &window, &seed})
    if (!r->ok()) return fail(r->error());
  o.seq_len = (int)*seq_len;
  o.batch = (int)*batch;
  o.steps = *steps;
  o.sinks = (int)*sinks;
  o.window = (int)*window;
  o.seed = (uint64_t)*seed;
  o.profile = args->has("profile");
  o.pipeline_teacher = !args->has("no-pipeline");
  auto result = bench::cuda::gpu_transfer_bench(o);
  if (!result.ok()) return fail(result.error());
  const Json& r = *result;
  if (args->has("json")) {
    std::printf("%s\n", r.dump().c_str());
    return 0;
  }
  std::printf("attention transfer, %s, random weights: %ld steps × %d × %d tokens, %.0f tokens/s "
              "(%.1f min per 10 M tokens), %ld new parameters, final NMSE %.4f, wall %.1f s\n",
              o.config_path.c_str(), o.steps, o.batch, o.seq_len, r["tokens_per_s"].get<double>(),
              r["minutes_per_10m_tokens"].get<double>(), r["new_params"].get<long>(),
              r["final_nmse"].get<double>(), r["wall_s"].get<double>());
  return 0;
}
#endif

}  // namespace

int cmd_bench(const Argv& argv) {
#ifdef GOLINEAR_HAVE_CUDA
  if (std::find(argv.begin(), argv.end(), "--transfer") != argv.end()) return bench_transfer(argv);
  const bool model_table = std::find(argv.begin(), argv.end(), "--config") != argv.end() ||
                           std::find(argv.begin(), argv.end(), "--model") != argv.end();
  if (model_table) return bench_model(argv);
  return bench_mixers(argv);
#else
  (void)argv;
  return fail("bench needs the CUDA build: this golinear was built without nvcc (GOLINEAR_CUDA=ON "
              "and nvcc on the PATH when configuring)");
#endif
}

}  // namespace golinear::cli
