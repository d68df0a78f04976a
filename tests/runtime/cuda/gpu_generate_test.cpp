// Generation on the GPU (runtime/cuda/gpu_sequences.h: gpu_prefill, then the decode step) against
// the CPU model, on a random head_dim-64 model: all softmax (KV cache), all hybrid (constant-size
// cache, CUDA-graph decode) and mixed (layer 0 softmax, layer 1 hybrid).
//
// Each step's GPU logits are compared with the CPU model's on the same prefix (the GPU's tokens
// fed to the CPU cache): normalized MSE below 3e-3 (bf16 weights and activations; the model
// tests measure 1e-5…1e-3, a cache defect — a wrong position, a stale state — gives ≥ 1e-1).
// Greedy tokens: the GPU's choice must be the CPU's argmax on that prefix unless the CPU's top
// two logits are closer than twice the largest logit difference of that step (a near-tie that
// bf16 rounding may flip); the greedy runs of runtime::generate and eval::greedy_generate on the
// two devices must agree up to the first such near-tie.
#include <gtest/gtest.h>

#include <cstdio>

#include "eval/generation_eval.h"
#include "kernels/cuda/cuda_test_util.h"
#include "model/cuda/gpu_model.h"
#include "runtime/cuda/gpu_sequences.h"
#include "model/cuda/random_models.h"
#include "runtime/generate.h"

namespace golinear {
namespace {

using kernels::test::compare;

struct StepCheck {
  int steps = 0, agree = 0;
  int first_near_tie = -1;  // step of the first near-tie (−1: none)
};

// Prompt of P tokens, then `steps` greedy GPU tokens; every step checked against the CPU.
StepCheck check_steps(const Model& cpu, golinear::model::cuda::GpuModel& gpu, int P, int steps, const char* what) {
  const int V = cpu.config.vocab_size;
  StepCheck check;
  const std::vector<int32_t> prompt = test::test_tokens(P, V, 3);
  auto gpu_step = golinear::runtime::cuda::gpu_sequences(gpu)(P + steps);
  EXPECT_TRUE(gpu_step.ok()) << gpu_step.error();
  if (!gpu_step.ok()) return check;
  SequenceCache cache = model_new_cache(cpu);
  std::vector<float> g(V), c(V);
  EXPECT_TRUE((*gpu_step)(prompt.data(), P, g.data()).ok());
  model_forward_cached(cpu, cache, prompt.data(), P, c.data(), true);
  double worst = 0;
  for (int s = 0; s < steps; ++s) {
    const auto e = compare(g.data(), c.data(), V);
    worst = std::max(worst, e.nmse);
    EXPECT_LT(e.nmse, 3e-3) << what << " step " << s;
    const int32_t next = test::argmax_of(g.data(), V), want = test::argmax_of(c.data(), V);
    std::vector<float> sorted = c;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    const bool near_tie = sorted[0] - sorted[1] < 2 * e.max_abs;
    if (near_tie && check.first_near_tie < 0) check.first_near_tie = s;
    if (!near_tie) {
      EXPECT_EQ(next, want) << what << " step " << s;
    }
    check.agree += next == want;
    ++check.steps;
    EXPECT_TRUE((*gpu_step)(&next, 1, g.data()).ok());
    model_forward_cached(cpu, cache, &next, 1, c.data(), true);
  }
  std::printf("  %-8s prompt %d + %d steps: worst step nmse %.3e, greedy agree %d/%d, first near-tie %d\n",
              what, P, steps, worst, check.agree, check.steps, check.first_near_tie);
  return check;
}

// runtime::generate and eval::greedy_generate, greedy, on both devices: equal tokens up to the
// first near-tie of check_steps (all of them when there is none).
void check_generate(const Model& cpu, golinear::model::cuda::GpuModel& gpu, int P, int steps, int first_near_tie,
                    const char* what) {
  const int V = cpu.config.vocab_size;
  const std::vector<int32_t> prompt = test::test_tokens(P, V, 3);
  runtime::GenerateOptions options;
  options.max_new_tokens = steps;
  const std::vector<int32_t> want = runtime::generate(cpu, prompt, options);
  auto got = runtime::generate(golinear::runtime::cuda::gpu_sequences(gpu), V, prompt, options);
  ASSERT_TRUE(got.ok()) << got.error();
  auto eval_got = eval::greedy_generate(golinear::runtime::cuda::gpu_sequences(gpu), V, prompt, steps, {});
  ASSERT_TRUE(eval_got.ok()) << eval_got.error();
  EXPECT_EQ(*eval_got, *got) << what;  // both greedy on the same GPU sequence
  const size_t checked = first_near_tie < 0 ? want.size() : (size_t)first_near_tie;
  ASSERT_EQ(got->size(), want.size()) << what;
  for (size_t i = 0; i < checked && i < want.size(); ++i) EXPECT_EQ((*got)[i], want[i]) << what << " token " << i;
  // Sampling on the host: the same seed gives the same GPU tokens twice.
  options.sampler = {0.8f, 0.9f, 7};
  auto a = runtime::generate(golinear::runtime::cuda::gpu_sequences(gpu), V, prompt, options);
  auto b = runtime::generate(golinear::runtime::cuda::gpu_sequences(gpu), V, prompt, options);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b) << what;
}

void run_case(Model& cpu, const char* what) {
  auto gpu = golinear::model::cuda::gpu_model_upload(cpu);
  ASSERT_TRUE(gpu.ok()) << gpu.error();
  const int P = 40, steps = 24;
  const StepCheck check = check_steps(cpu, **gpu, P, steps, what);
  EXPECT_EQ(check.steps, steps);
  check_generate(cpu, **gpu, P, steps, check.first_near_tie, what);
}

TEST(GpuGenerate, SoftmaxMatchesCpu) {
  REQUIRE_GPU();
  auto cpu = test::random_model(test::small_llama_config(), 21);
  run_case(*cpu, "softmax");
}

TEST(GpuGenerate, HybridMatchesCpu) {
  REQUIRE_GPU();
  auto cpu = test::random_model(test::small_llama_config(), 22);
  cpu->mixers = test::linearized_stack(*cpu, {}, 5);
  run_case(*cpu, "hybrid");
}

TEST(GpuGenerate, MixedMatchesCpu) {
  REQUIRE_GPU();
  auto cpu = test::random_model(test::small_llama_config(), 23);
  cpu->mixers = test::linearized_stack(*cpu, {0}, 6);
  run_case(*cpu, "mixed");
}

// A prompt longer than the sequence's cache is refused, not written past its end.
TEST(GpuGenerate, SequenceRefusesOverflow) {
  REQUIRE_GPU();
  auto cpu = test::random_model(test::small_llama_config(), 24);
  auto gpu = golinear::model::cuda::gpu_model_upload(*cpu);
  ASSERT_TRUE(gpu.ok()) << gpu.error();
  auto step = golinear::runtime::cuda::gpu_sequences(**gpu)(8);
  ASSERT_TRUE(step.ok()) << step.error();
  const std::vector<int32_t> ids = test::test_tokens(9, cpu->config.vocab_size, 1);
  std::vector<float> logits(cpu->config.vocab_size);
  const Status st = (*step)(ids.data(), 9, logits.data());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("exceed"), std::string::npos) << st.error();
}

}  // namespace
}  // namespace golinear
