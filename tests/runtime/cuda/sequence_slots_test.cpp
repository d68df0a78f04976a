// The GPU sequence slots of the server (runtime/cuda/sequence_slots.h) against the CPU slots
// (runtime/cpu_sequence_slots.h) on a random head_dim-64 model, all softmax and all hybrid:
// three slots with prompts of different lengths, then decode steps that advance the three in one
// call (gpu_decode_batch), both devices fed the CPU's greedy tokens. Every row's logits within
// normalized MSE 3e-3 of the CPU's (bf16; a slot mixed up with another or a stale state gives
// ≥ 1e-1), a slot's row
// within bf16 rounding whether it decodes alone or beside the others, a reset slot like a new
// one, and a snapshot restored into another slot continuing bit for bit. Snapshots taken while
// decoding goes on (their copies overlapping the next steps) each restored bit for bit, and the
// pinned buffers of the snapshot pool reused.
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

// A snapshot of slot 0 before each of `steps` decode steps, the step enqueued at once (the copy
// on the pool's stream overlaps it and the step of slot 1 before it; the step writes the state
// the copy reads, so it must wait for it on the GPU): each snapshot restored into a slot of
// another set continues as slot 0 did from that point, the same logits bit for bit (a copy that
// read a later state, or bytes read before the copy ended, differ), also after the slots that
// took it are destroyed. Pooled (every layer hybrid): the live snapshots hold one buffer each
// (cudaMallocHost calls counted), destroyed ones leave `idle` buffers that the next snapshots
// take without allocating; a model with softmax layers copies without the pool.
void check_overlapped_snapshots(Model& cpu, const char* what, bool pooled) {
  auto gpu_model = golinear::model::cuda::gpu_model_upload(cpu);
  ASSERT_TRUE(gpu_model.ok()) << gpu_model.error();
  const int V = cpu.config.vocab_size, steps = 12, idle = 3;
  auto gpu = runtime::cuda::GpuSequenceSlots::create(**gpu_model, 2, 128, idle);
  auto twin = runtime::cuda::GpuSequenceSlots::create(**gpu_model, 1, 128, idle);
  ASSERT_TRUE(gpu.ok() && twin.ok());
  const std::vector<int32_t> prompt = test::test_tokens(21, V, 5), other = test::test_tokens(17, V, 6);
  std::vector<float> logits(V), side(V);
  ASSERT_TRUE((*gpu)->prefill(0, prompt.data(), (int)prompt.size(), logits.data()).ok());
  ASSERT_TRUE((*gpu)->prefill(1, other.data(), (int)other.size(), side.data()).ok());
  std::vector<std::shared_ptr<const runtime::StateSnapshot>> saved;
  std::vector<int32_t> fed;
  std::vector<std::vector<float>> after;  // slot 0's logits of the step after each snapshot
  const int zero = 0, one = 1;
  int32_t side_token = test::argmax_of(side.data(), V);
  for (int s = 0; s < steps; ++s) {
    saved.push_back((*gpu)->snapshot(0));
    ASSERT_TRUE(saved.back() != nullptr) << what << " step " << s;
    EXPECT_EQ(saved.back()->position(), (long)prompt.size() + s) << what;
    fed.push_back(test::argmax_of(logits.data(), V));
    ASSERT_TRUE((*gpu)->decode(&one, &side_token, 1, side.data()).ok());
    ASSERT_TRUE((*gpu)->decode(&zero, &fed.back(), 1, logits.data()).ok());
    after.push_back(logits);
    side_token = test::argmax_of(side.data(), V);
  }
  const uint64_t allocated = (*gpu)->snapshot_pool_stats().allocations;
  EXPECT_EQ(allocated, pooled ? (uint64_t)steps : 0u) << what;
  std::vector<float> restored(V);
  for (int s = steps - 1; s >= 0; s -= 2) {  // out of order: the twin's state goes back and forth
    ASSERT_TRUE((*twin)->restore(0, *saved[s]).ok()) << what << " snapshot " << s;
    ASSERT_TRUE((*twin)->decode(&zero, &fed[s], 1, restored.data()).ok());
    EXPECT_EQ(0, std::memcmp(after[s].data(), restored.data(), V * sizeof(float)))
        << what << " snapshot " << s;
  }
  // The slots that took them gone, the snapshots still restore (the pool lives with them).
  (*gpu).reset();
  for (int s = 0; s < steps; s += 2) {
    ASSERT_TRUE((*twin)->restore(0, *saved[s]).ok()) << what << " snapshot " << s;
    ASSERT_TRUE((*twin)->decode(&zero, &fed[s], 1, restored.data()).ok());
    EXPECT_EQ(0, std::memcmp(after[s].data(), restored.data(), V * sizeof(float)))
        << what << " snapshot " << s << " after its slots";
  }
  if (!pooled) return;
  // The twin's own pool: buffers given back are kept (at most `idle`) and taken again.
  std::vector<std::shared_ptr<const runtime::StateSnapshot>> mine;
  for (int i = 0; i < idle + 2; ++i) mine.push_back((*twin)->snapshot(0));
  EXPECT_EQ((*twin)->snapshot_pool_stats().allocations, (uint64_t)idle + 2) << what;
  const size_t bytes = mine[0]->bytes();
  mine.clear();
  runtime::cuda::SnapshotPoolStats stats = (*twin)->snapshot_pool_stats();
  EXPECT_EQ(stats.idle_buffers, (size_t)idle) << what;
  EXPECT_EQ(stats.idle_bytes, (size_t)idle * bytes) << what;
  // Another state, into the buffers that held the last one.
  ASSERT_TRUE((*twin)->decode(&zero, &fed[1], 1, restored.data()).ok());
  for (int i = 0; i < idle; ++i) mine.push_back((*twin)->snapshot(0));
  stats = (*twin)->snapshot_pool_stats();
  EXPECT_EQ(stats.allocations, (uint64_t)idle + 2) << what << ": idle buffers not reused";
  EXPECT_EQ(stats.idle_buffers, 0u) << what;
  mine.push_back((*twin)->snapshot(0));
  EXPECT_EQ((*twin)->snapshot_pool_stats().allocations, (uint64_t)idle + 3) << what;
  // A reused buffer holds the new state only: it continues as the freshly allocated one does.
  std::vector<float> direct(V);
  const int32_t token = fed[0];
  ASSERT_TRUE((*twin)->restore(0, *mine[0]).ok());
  ASSERT_TRUE((*twin)->decode(&zero, &token, 1, restored.data()).ok());
  ASSERT_TRUE((*twin)->restore(0, *mine.back()).ok());
  ASSERT_TRUE((*twin)->decode(&zero, &token, 1, direct.data()).ok());
  EXPECT_EQ(0, std::memcmp(direct.data(), restored.data(), V * sizeof(float))) << what;
}

TEST(GpuSequenceSlots, SnapshotsOverlapDecodingAndRestoreBitForBit) {
  REQUIRE_GPU();
  auto hybrid = test::random_model(test::small_llama_config(), 36);
  hybrid->mixers = test::linearized_stack(*hybrid, {}, 10);
  check_overlapped_snapshots(*hybrid, "hybrid", true);
  auto mixed = test::random_model(test::small_llama_config(), 37);
  mixed->mixers = test::linearized_stack(*mixed, {0}, 11);
  check_overlapped_snapshots(*mixed, "mixed", false);
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
