// golinear bench: the GPU benchmarks.
//   golinear bench [--mixers] [mixer options]      the mixer table of ANCHORS.md
//                                                  (kernels/cuda/mixer_bench.h)
//   golinear bench --config FILE.json | --model DIR [model options]
//                                                  the whole-model table (runtime/cuda/model_bench.h)
#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#ifdef GOLINEAR_HAVE_CUDA
#include "kernels/cuda/mixer_bench.h"
#include "runtime/cuda/model_bench.h"
#include "train/cuda/transfer_bench.h"
#endif
#include "cli/args.h"

namespace golinear::cli {

namespace {

constexpr const char* kUsage = R"(usage:
  golinear bench [--mixers] [--json --seq 2048,... --contexts 4096,... --repeats N --warmups N
                 --value-block V --no-backward --heads H --kv-heads G --head-dim D --hidden C]
      per-layer mixer table: prefill, forward+backward, decode step and cache bytes for full
      attention, Gated DeltaNet and the hybrid mixer (Llama-3.1-8B attention shapes by default)
  golinear bench --config FILE.json | --model DIR [--contexts 4096,32768,131072,1048576
                 --variants hybrid,full --full-prefill-max 131072 --prefill-max N --repeats N
                 --warmups N --decode-repeats N --sinks S --window W --seed S --json --json-file F]
      whole-model table: prefill tokens/s, batch-1 decode tokens/s (one CUDA graph per token)
      and GPU memory against context, for the model with every layer linearized (default
      hybrid recipe, fresh parameters) and with full attention (KV cache). --config builds
      random bf16 weights of that Hugging Face config.json on the GPU (e.g.
      bench/configs/llama-3.1-8b.json); --model loads a checkpoint.
  golinear bench --transfer --config FILE.json [--seq-len 4096 --batch 1 --steps 20 --sinks 8
                 --window 56 --seed 0 --json]
      attention-transfer throughput of that shape with random weights and random tokens, every
      layer a fresh default-recipe hybrid, trained as `linearize --device cuda` trains (tokens/s,
      minutes per 10 M tokens)
)";

#ifdef GOLINEAR_HAVE_CUDA
int bench_transfer(const Argv& argv) {
  auto args = Args::parse("bench", argv,
                          {{"transfer", false}, {"config", true}, {"seq-len", true}, {"batch", true},
                           {"steps", true}, {"sinks", true}, {"window", true}, {"seed", true},
                           {"json", false}},
                          0, 0);
  if (!args.ok()) return fail(args.error());
  if (!args->has("config")) return fail("golinear bench --transfer: --config FILE.json is required");
  train::cuda::TransferBenchOptions o;
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
  auto result = train::cuda::gpu_transfer_bench(o);
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
  if (std::find(argv.begin(), argv.end(), "--help") != argv.end()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
#ifdef GOLINEAR_HAVE_CUDA
  if (std::find(argv.begin(), argv.end(), "--transfer") != argv.end()) return bench_transfer(argv);
  const bool model_table = std::find(argv.begin(), argv.end(), "--config") != argv.end() ||
                           std::find(argv.begin(), argv.end(), "--model") != argv.end();
  if (model_table) {
    auto options = cuda::model_bench_parse(argv);
    if (!options.ok()) return fail(options.error());
    auto table = cuda::model_bench_run(*options);
    if (!table.ok()) return fail(table.error());
    std::fputs(table->c_str(), stdout);
    return 0;
  }
  Argv rest;
  for (const auto& a : argv)
    if (a != "--mixers") rest.push_back(a);
  auto options = kernels::cuda::mixer_bench_parse(rest);
  if (!options.ok()) return fail(options.error());
  auto table = kernels::cuda::mixer_bench_run(*options);
  if (!table.ok()) return fail(table.error());
  std::fputs(table->c_str(), stdout);
  return 0;
#else
  (void)argv;
  return fail("bench needs the CUDA build: this golinear was built without nvcc (GOLINEAR_CUDA=ON "
              "and nvcc on the PATH when configuring)");
#endif
}

}  // namespace golinear::cli
