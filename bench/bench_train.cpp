// Training throughput on the CPU for the bundled model: one attention-transfer step and one
// end-to-end distillation step of the default recipe (GDN + 8 sinks + 56 window + conv, gate),
// in tokens/s. Run: build/bench/bench_train [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "model/linearization.h"
#include "train/attention_transfer.h"
#include "train/distillation.h"

namespace golinear {
namespace {

Model& bench_model() {
  static std::unique_ptr<Model> model = [] {
    auto loaded = model_load(GOLINEAR_MODEL_DIR "/tiny-llama3-25m");
    if (!loaded.ok()) {
      std::fprintf(stderr, "bench_train: %s\n", loaded.error().c_str());
      std::exit(1);
    }
    return std::move(*loaded);
  }();
  return *model;
}

PackedDataset bench_data(int T, int V) {
  PackedDataset data;
  data.seq_len = T;
  for (long i = 0; i < T; ++i) data.tokens.push_back(i == 0 ? 0 : (int32_t)((i * 2654435761u) % (unsigned)V));
  return data;
}

template <bool kEndToEnd>
void BM_TrainStep(benchmark::State& state) {
  Model& model = bench_model();
  const int T = (int)state.range(0);
  auto students = linearized_mixers(model, mixers::MixerOptions{}, {}, 0);
  PackedDataset data = bench_data(T, model.config.vocab_size);
  train::TrainOptions options;
  options.steps = 1;
  long tokens = 0;
  for (auto _ : state) {
    auto report = kEndToEnd ? train::distill_end_to_end(model, *students, data, options)
                            : train::attention_transfer(model, *students, data, options);
    benchmark::DoNotOptimize(report.ok());
    tokens += T;
  }
  state.counters["tokens_per_s"] = benchmark::Counter((double)tokens, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_TrainStep<false>)->Name("BM_AttentionTransferStep")->Arg(1024)->Arg(2048)
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(5.0);
BENCHMARK(BM_TrainStep<true>)->Name("BM_DistillationStep")->Arg(1024)
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(5.0);

}  // namespace
}  // namespace golinear

BENCHMARK_MAIN();
