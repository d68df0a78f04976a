// The leave-one-layer-linearized sensitivity on the GPU (analysis/cuda/analyze.h) against the CPU
// reference (analysis::layer_sensitivity), and its next-token NLL kernel (kernels/cuda/loss.h
// next_token_nll_rows) against logprobs_of_next_tokens on the same fp32 logits.
// The model: a random head_dim-64 Llama whose attention matters (o_proj ×4: a swapped mixer moves
// the logits) and whose logits are sharp (lm_head ×3), so that the CPU sensitivities are well
// apart from 0 and from each other (layer 0: +0.16, layer 1: +0.06 on these 4 × 256 tokens; the
// plain random model's are ±0.01, within the bf16 noise). The GPU runs bf16 weights: its logits
// move by nmse ~2e-3 (tests/model/cuda), a token's log-prob by a few hundredths, the mean NLL of
// 1020 tokens by ~5e-3, and the sensitivity (a ratio of perplexities whose rounding is mostly
// common) by less. Tolerances: the teacher's perplexity 3% relative, each sensitivity 0.01 + 5%
// of the CPU's; a layer not swapped (0), or the other layer's mixer swapped, misses by ≥ 0.05.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "analysis/analyze.h"
#include "analysis/cuda/analyze.h"
#include "kernels/cuda/cuda_test_util.h"
#include "kernels/cuda/device_resources.h"
#include "kernels/cuda/loss.h"
#include "model/cuda/gpu_model.h"
#include "model/cuda/random_models.h"

namespace golinear {
namespace {

using golinear::model::cuda::GpuModel;

std::unique_ptr<Model> sensitive_model() {
  auto m = test::random_model(test::small_llama_config(), 41);
  for (auto& w : m->layers)
    for (auto& x : w.o_proj) x *= 4.0f;
  for (auto& x : m->lm_head) x *= 3.0f;
  return m;
}

std::vector<int32_t> sequences(int N, int T, int V) {
  std::vector<int32_t> tokens;
  for (int n = 1; n <= N; ++n) {
    const std::vector<int32_t> s = test::test_tokens(T, V, n);
    tokens.insert(tokens.end(), s.begin(), s.end());
  }
  return tokens;
}

// The kernel on fp32 logits the CPU also reads: the same per-row NLL up to fp32 rounding.
TEST(GpuLayerSensitivity, NextTokenNllMatchesCpu) {
  REQUIRE_GPU();
  const int T = 37, V = 1000;
  const std::vector<float> logits = kernels::test::random_floats((size_t)T * V, 3, -8.0f, 8.0f);
  std::vector<int32_t> ids = test::test_tokens(T, V, 4);
  kernels::cuda::DeviceBuffer<float> dl;
  kernels::cuda::DeviceBuffer<int32_t> di;
  kernels::cuda::DeviceBuffer<double> dn;
  ASSERT_OK(dl.allocate(logits.size()));
  ASSERT_OK(di.allocate(T));
  ASSERT_OK(dn.allocate(T));
  ASSERT_EQ(cudaMemcpy(dl.get(), logits.data(), logits.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(di.get(), ids.data(), (size_t)T * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_OK(kernels::cuda::next_token_nll_rows(dn.get(), dl.get(), di.get(), T, V, nullptr));
  std::vector<double> got(T - 1);
  ASSERT_EQ(cudaMemcpy(got.data(), dn.get(), (size_t)(T - 1) * 8, cudaMemcpyDeviceToHost), cudaSuccess);
  const std::vector<float> want = logprobs_of_next_tokens(logits.data(), ids.data(), T, V);
  for (int t = 0; t < T - 1; ++t) EXPECT_NEAR(got[t], -want[t], 1e-4 * (1.0 + std::abs(want[t]))) << "row " << t;
}

// The GPU model's NLL of one sequence against the CPU model's (bf16 weights: 1% of the sum).
TEST(GpuLayerSensitivity, SequenceNllMatchesCpu) {
  REQUIRE_GPU();
  auto cpu = sensitive_model();
  const int T = 200, V = cpu->config.vocab_size;
  const std::vector<int32_t> ids = test::test_tokens(T, V, 7);
  std::vector<float> logits((size_t)T * V);
  model_forward(*cpu, ids.data(), T, logits.data());
  double want = 0;
  for (float lp : logprobs_of_next_tokens(logits.data(), ids.data(), T, V)) want -= lp;
  auto gpu = golinear::model::cuda::gpu_model_upload(*cpu);
  ASSERT_TRUE(gpu.ok()) << gpu.error();
  auto got = analysis::cuda::gpu_sequence_nll(**gpu)(ids.data(), T);
  ASSERT_TRUE(got.ok()) << got.error();
  std::printf("  nll of %d tokens: cpu %.4f gpu %.4f\n", T - 1, want, *got);
  EXPECT_NEAR(*got, want, 0.01 * want);
  EXPECT_FALSE(analysis::cuda::gpu_sequence_nll(**gpu)(ids.data(), 1).ok());  // nothing to predict
}

// An all-linear student and one with layer 1 kept softmax (NaN there), against the CPU; the GPU
// teacher is every layer softmax again afterwards (its logits as before).
TEST(GpuLayerSensitivity, MatchesCpu) {
  REQUIRE_GPU();
  const int N = 4, T = 256;
  for (const std::vector<int>& keep : {std::vector<int>{}, std::vector<int>{1}}) {
    auto teacher = sensitive_model();
    const int V = teacher->config.vocab_size, L = teacher->config.num_layers;
    const std::vector<int32_t> tokens = sequences(N, T, V);
    MixerStack student = test::linearized_stack(*teacher, keep, 8);
    auto gpu = golinear::model::cuda::gpu_model_upload(*teacher);
    ASSERT_TRUE(gpu.ok()) << gpu.error();
    std::vector<float> before((size_t)T * V), after((size_t)T * V);
    ASSERT_OK((*gpu)->forward(tokens.data(), T, before.data(), false));

    // NaN: measured here (a finite value would be taken as the known teacher perplexity).
    const double nan = std::numeric_limits<double>::quiet_NaN();
    double cpu_ppl = nan, gpu_ppl = nan;
    auto want = analysis::layer_sensitivity(*teacher, student, tokens.data(), N, T, &cpu_ppl);
    ASSERT_TRUE(want.ok()) << want.error();
    int steps = 0;
    auto got = analysis::cuda::layer_sensitivity(**gpu, student, tokens.data(), N, T, &gpu_ppl,
                                                 [&steps] { ++steps; });
    ASSERT_TRUE(got.ok()) << got.error();
    ASSERT_EQ(got->size(), (size_t)L);
    EXPECT_EQ(steps, 1 + L - (int)keep.size());
    std::printf("  keep %zu: teacher ppl cpu %.2f gpu %.2f\n", keep.size(), cpu_ppl, gpu_ppl);
    EXPECT_NEAR(gpu_ppl, cpu_ppl, 0.03 * cpu_ppl);
    for (int l = 0; l < L; ++l) {
      std::printf("    layer %d sensitivity cpu %+.5f gpu %+.5f\n", l, (*want)[l], (*got)[l]);
      if (std::find(keep.begin(), keep.end(), l) != keep.end()) {
        EXPECT_TRUE(std::isnan((*got)[l])) << "layer " << l << " is kept softmax";
        continue;
      }
      EXPECT_GT(std::abs((*want)[l]), 0.05) << "the CPU sensitivity must stand out of the bf16 noise";
      EXPECT_NEAR((*got)[l], (*want)[l], 0.01 + 0.05 * std::abs((*want)[l])) << "layer " << l;
    }
    EXPECT_FALSE((*gpu)->has_hybrid_layers());
    ASSERT_OK((*gpu)->forward(tokens.data(), T, after.data(), false));
    double worst = 0;
    for (size_t i = 0; i < before.size(); ++i) worst = std::max(worst, (double)std::abs(after[i] - before[i]));
    EXPECT_LT(worst, 1e-3) << "the teacher's logits changed";
  }
}

TEST(GpuLayerSensitivity, ClearErrors) {
  REQUIRE_GPU();
  auto teacher = test::random_model(test::small_llama_config(), 42);
  const int T = 16, V = teacher->config.vocab_size;
  const std::vector<int32_t> tokens = test::test_tokens(T, V, 1);
  MixerStack student = test::linearized_stack(*teacher, {}, 9);
  auto gpu = golinear::model::cuda::gpu_model_upload(*teacher);
  ASSERT_TRUE(gpu.ok()) << gpu.error();
  MixerStack short_stack;
  short_stack.push_back(std::move(student[0]));
  auto e = analysis::cuda::layer_sensitivity(**gpu, short_stack, tokens.data(), 1, T);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("layers"), std::string::npos) << e.error();
  student[0] = std::move(short_stack[0]);
  ASSERT_OK((*gpu)->set_layer_mixer(0, *student[0]));  // not the base any more
  e = analysis::cuda::layer_sensitivity(**gpu, student, tokens.data(), 1, T);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("softmax"), std::string::npos) << e.error();
}

}  // namespace
}  // namespace golinear
