// The GPU sequence slots of the server (runtime/cuda/sequence_slots.h) against the CPU slots
// (runtime/cpu_sequence_slots.h) on a random head_dim-64 model, all softmax and all hybrid:
// three slots with prompts of different lengths, then decode steps that advance the three in one
// call (gpu_decode_batch), both devices fed the CPU's greedy tokens. Every row's logits within
// normalized MSE 3e-3 of the CPU's (bf16; a slot mixed up with another or a stale state gives
// ≥ 1e-1), a slot's row
// within bf16 rounding whether it decodes alone or beside the others, a reset slot like a new
// one, and a snapshot restored into another slot continuing bit for bit.
#include "runtime/cuda/sequence_slots.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kernels/cuda/cuda_test_util.h"
#include "model/cuda/random_models.h"
#include "runtime/cpu_sequence_slots.h"

namespace golinear {
namespace {

using kernels::test::compare;

void check_slots(Model& cpu, const char* what) {
  auto gpu_model = golinear::model::cuda::gpu_model_upload(cpu);
  ASSERT_TRUE(gpu_model.ok()) << gpu_model.error();
  const int V = cpu.config.vocab_size, B = 3, steps = 8;
  auto gpu = runtime::cuda::GpuSequenceSlots::create(**gpu_model, B, 128);
  ASSERT_TRUE(gpu.ok()) << gpu.error();
  runtime::CpuSequenceSlots host(cpu, B);
  std::vector<float> g((size_t)B * V), c((size_t)B * V);
  std::vector<int32_t> next(B);
  const int slots[B] = {0, 1, 2};
  for (int b = 0; b < B; ++b) {
    const std::vector<int32_t> prompt = test::test_tokens(20 + 9 * b, V, 3 + b);
    ASSERT_TRUE((*gpu)->prefill(b, prompt.data(), (int)prompt.size(), &g[(size_t)b * V]).ok());
    ASSERT_TRUE(host.prefill(b, prompt.data(), (int)prompt.size(), &c[(size_t)b * V]).ok());
  }
  for (int s = 0; s <= steps; ++s) {
    for (int b = 0; b < B; ++b) {
      const auto e = compare(&g[(size_t)b * V], &c[(size_t)b * V], V);
      EXPECT_LT(e.nmse, 3e-3) << what << " step " << s << " slot " << b;
      next[b] = test::argmax_of(&c[(size_t)b * V], V);
    }
    if (s == steps) break;
    ASSERT_TRUE((*gpu)->decode(slots, next.data(), B, g.data()).ok());
    ASSERT_TRUE(host.decode(slots, next.data(), B, c.data()).ok());
  }
  auto twin = runtime::cuda::GpuSequenceSlots::create(**gpu_model, B, 128);
  ASSERT_TRUE(twin.ok()) << twin.error();
  // A reset slot is a new sequence: the same logits as a fresh slot of another set for the same
  // prompt; and its next row the same whether it decodes alone or beside the others.
  const std::vector<int32_t> prompt = test::test_tokens(25, V, 11);
  std::vector<float> fresh(V), reset(V);
  ASSERT_TRUE((*twin)->prefill(2, prompt.data(), (int)prompt.size(), fresh.data()).ok());
  ASSERT_TRUE((*gpu)->reset(1).ok());
  ASSERT_TRUE((*gpu)->prefill(1, prompt.data(), (int)prompt.size(), reset.data()).ok());
  EXPECT_LT(compare(reset.data(), fresh.data(), V).nmse, 1e-10) << what;
  const int32_t token = test::argmax_of(fresh.data(), V);
  std::vector<float> alone(V), together((size_t)B * V);
  ASSERT_TRUE((*twin)->decode(&slots[2], &token, 1, alone.data()).ok());
  const int32_t tokens[B] = {next[0], token, next[2]};
  ASSERT_TRUE((*gpu)->decode(slots, tokens, B, together.data()).ok());
  // The batched step's products run B rows: not bit for bit a lone row's, within bf16 rounding.
  EXPECT_LT(compare(&together[(size_t)V], alone.data(), V).nmse, 1e-4) << what;
  // A snapshot restored into another slot continues as the original: the same logits, bit for bit
  // (a step of one slot each), and the same state size.
  auto saved = (*gpu)->snapshot(1);
  ASSERT_TRUE(saved != nullptr) << what;
  EXPECT_EQ(saved->position(), (long)prompt.size() + 1) << what;
  const int32_t follow = test::argmax_of(&together[(size_t)V], V);
  std::vector<float> original(V), restored(V);
  ASSERT_TRUE((*gpu)->decode(&slots[1], &follow, 1, original.data()).ok());
  ASSERT_TRUE((*twin)->restore(0, *saved).ok());
  ASSERT_TRUE((*twin)->decode(&slots[0], &follow, 1, restored.data()).ok());
  EXPECT_EQ(0, std::memcmp(original.data(), restored.data(), V * sizeof(float))) << what;
  EXPECT_EQ((*twin)->slot_bytes(0), (*gpu)->slot_bytes(1)) << what;
  EXPECT_FALSE((*gpu)->prefill(3, prompt.data(), 1, alone.data()).ok());  // no such slot
}

// Prompts of several empty slots in one call (prefill_batch: one packed forward on the GPU)
// against the CPU slots' prefills and the GPU's one-slot prefills: the last logits and the next
// decode steps within the same bounds as above (a prompt read into another slot's cache, or from
// another sequence's rows, gives ≥ 1e-1); a one-token prompt and a bad slot go alone, the bad
// one with its own error.
void check_prefill_batch(Model& cpu, const char* what) {
  auto gpu_model = golinear::model::cuda::gpu_model_upload(cpu);
  ASSERT_TRUE(gpu_model.ok()) << gpu_model.error();
  const int V = cpu.config.vocab_size, B = 4, steps = 4;
  auto gpu = runtime::cuda::GpuSequenceSlots::create(**gpu_model, B, 128);
  auto single = runtime::cuda::GpuSequenceSlots::create(**gpu_model, B, 128);
  ASSERT_TRUE(gpu.ok() && single.ok());
  runtime::CpuSequenceSlots host(cpu, B);
  std::vector<std::vector<int32_t>> prompts;
  for (int b = 0; b < B; ++b) prompts.push_back(test::test_tokens(b == 3 ? 1 : 20 + 9 * b, V, 40 + b));
  std::vector<float> g((size_t)B * V), c((size_t)B * V), one((size_t)B * V), bad(V);
  std::vector<runtime::PrefillChunk> chunks;
  for (int b = 0; b < B; ++b)
    chunks.push_back({b, prompts[b].data(), (int)prompts[b].size(), &g[(size_t)b * V]});
  chunks.push_back({7, prompts[0].data(), 3, bad.data()});  // no such slot
  const std::vector<Status> statuses = (*gpu)->prefill_batch(chunks);
  ASSERT_EQ(statuses.size(), chunks.size());
  for (int b = 0; b < B; ++b) {
    ASSERT_TRUE(statuses[b].ok()) << what << " slot " << b << ": " << statuses[b].error();
    ASSERT_TRUE(host.prefill(b, prompts[b].data(), (int)prompts[b].size(), &c[(size_t)b * V]).ok());
    ASSERT_TRUE((*single)->prefill(b, prompts[b].data(), (int)prompts[b].size(), &one[(size_t)b * V]).ok());
    EXPECT_LT(compare(&g[(size_t)b * V], &one[(size_t)b * V], V).nmse, 1e-4) << what << " slot " << b;
  }
  EXPECT_FALSE(statuses[B].ok()) << what;
  const int slots[B] = {0, 1, 2, 3};
  std::vector<int32_t> next(B);
  for (int s = 0; s <= steps; ++s) {
    for (int b = 0; b < B; ++b) {
      EXPECT_LT(compare(&g[(size_t)b * V], &c[(size_t)b * V], V).nmse, 3e-3)
          << what << " step " << s << " slot " << b;
      next[b] = test::argmax_of(&c[(size_t)b * V], V);
    }
    if (s == steps) break;
    ASSERT_TRUE((*gpu)->decode(slots, next.data(), B, g.data()).ok());
    ASSERT_TRUE(host.decode(slots, next.data(), B, c.data()).ok());
  }
}

TEST(GpuSequenceSlots, PrefillBatchMatchesCpuSlots) {
  REQUIRE_GPU();
  auto softmax = test::random_model(test::small_llama_config(), 33);
  check_prefill_batch(*softmax, "softmax");
  auto hybrid = test::random_model(test::small_llama_config(), 34);
  hybrid->mixers = test::linearized_stack(*hybrid, {}, 8);
  check_prefill_batch(*hybrid, "hybrid");
  auto mixed = test::random_model(test::small_llama_config(), 35);
  mixed->mixers = test::linearized_stack(*mixed, {0}, 9);
  check_prefill_batch(*mixed, "mixed");
}

TEST(GpuSequenceSlots, SoftmaxMatchesCpuSlots) {
  REQUIRE_GPU();
  auto cpu = test::random_model(test::small_llama_config(), 31);
  check_slots(*cpu, "softmax");
}

TEST(GpuSequenceSlots, HybridMatchesCpuSlots) {
  REQUIRE_GPU();
  auto cpu = test::random_model(test::small_llama_config(), 32);
  cpu->mixers = test::linearized_stack(*cpu, {}, 7);
  check_slots(*cpu, "hybrid");
}

}  // namespace
}  // namespace golinear
