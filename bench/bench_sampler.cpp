// Time of one Sampler::sample (runtime/sampler.h) at the tiny model's vocabulary (8192) and
// Llama-3's (128,256), with the request defaults (temperature 1, no restriction) and with
// top_p 0.9. The logits are Gaussian with standard deviation σ (the third argument, ×1): σ 4 keeps
// a nucleus of ~0.3% of the vocabulary (a peaked next-token distribution), σ 2 one of ~20%.
// Run: build/bench/bench_sampler [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "runtime/sampler.h"

namespace golinear {
namespace {

void BM_Sample(benchmark::State& state) {
  const int V = (int)state.range(0);
  const float top_p = state.range(1) ? 0.9f : 1.0f;
  const float sigma = (float)state.range(2);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> logits(V);
  for (float& l : logits) l = normal(rng);
  runtime::Sampler sampler({1.0f, top_p, 7, 0, 0.0f});
  for (auto _ : state) benchmark::DoNotOptimize(sampler.sample(logits.data(), V));
  state.SetLabel(top_p < 1 ? "top_p 0.9" : "defaults");
}
BENCHMARK(BM_Sample)
    ->ArgsProduct({{8192, 128256}, {0, 1}, {2, 4}})
    ->ArgNames({"V", "top_p", "sigma"})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace golinear

BENCHMARK_MAIN();
