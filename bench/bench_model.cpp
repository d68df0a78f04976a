// Prefill and decode throughput of a checkpoint on the CPU (default: the bundled model), and the
// process's peak resident memory. Run: build/bench/bench_model [--benchmark_filter=...]
// GOLINEAR_BENCH_MODEL=DIR selects another checkpoint.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <cstdlib>
#include <memory>

#include "model/transformer.h"

namespace golinear {
namespace {

const Model& bench_model() {
  static std::unique_ptr<Model> model = [] {
    const char* dir = std::getenv("GOLINEAR_BENCH_MODEL");
    auto loaded = model_load(dir ? dir : GOLINEAR_MODEL_DIR "/tiny-llama3-25m");
    if (!loaded.ok()) {
      std::fprintf(stderr, "bench_model: %s\n", loaded.error().c_str());
      std::exit(1);
    }
    return std::move(*loaded);
  }();
  return *model;
}

std::vector<int32_t> bench_tokens(int T, int V) {
  std::vector<int32_t> ids(T);
  for (int t = 0; t < T; ++t) ids[t] = (int32_t)((t * 2654435761u) % (unsigned)V);
  return ids;
}

void report_memory(benchmark::State& state) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  state.counters["peak_rss_MiB"] = usage.ru_maxrss / 1024.0;
}

// One forward over T tokens (logits of the last position only, as a prefill does).
void BM_Prefill(benchmark::State& state) {
  const Model& model = bench_model();
  const int T = (int)state.range(0), V = model.config.vocab_size;
  auto ids = bench_tokens(T, V);
  std::vector<float> logits(V);
  for (auto _ : state) {
    SequenceCache cache = model_new_cache(model);
    model_forward_cached(model, cache, ids.data(), T, logits.data(), true);
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter((double)T * state.iterations(), benchmark::Counter::kIsRate);
  report_memory(state);
}
BENCHMARK(BM_Prefill)->Arg(128)->Arg(512)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

// Decode: one token at a time after a prompt of `context` tokens; measures the decode steps only.
void BM_Decode(benchmark::State& state) {
  const Model& model = bench_model();
  const int context = (int)state.range(0), steps = 32, V = model.config.vocab_size;
  auto ids = bench_tokens(context + steps, V);
  std::vector<float> logits(V);
  for (auto _ : state) {
    state.PauseTiming();
    SequenceCache cache = model_new_cache(model);
    model_forward_cached(model, cache, ids.data(), context, logits.data(), true);
    state.ResumeTiming();
    for (int s = 0; s < steps; ++s)
      model_forward_cached(model, cache, &ids[context + s], 1, logits.data(), true);
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter((double)steps * state.iterations(), benchmark::Counter::kIsRate);
  report_memory(state);
}
BENCHMARK(BM_Decode)->Arg(16)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace golinear

BENCHMARK_MAIN();
