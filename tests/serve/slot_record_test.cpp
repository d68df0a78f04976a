// Slot save/restore (Scheduler::slot_save/slot_restore) on the bundled model's CPU slots: the
// restored state is the saved one bit for bit, seen through the logprobs of what follows.
#include <gtest/gtest.h>

#include "model/transformer.h"
#include "runtime/cpu_sequence_slots.h"
#include "serve/scheduler.h"

namespace golinear::serve {
namespace {

const std::string kModel = std::string(GOLINEAR_MODEL_DIR) + "/tiny-llama3-25m";

std::vector<Delta> run(Scheduler& scheduler, GenerationParams params, Job** out = nullptr) {
  auto job = std::make_shared<Job>(std::move(params));
  EXPECT_EQ(scheduler.submit(job), Scheduler::Submitted::accepted);
  std::vector<Delta> deltas;
  for (int i = 0; i < 3000 && !job->wait(std::chrono::milliseconds(20), &deltas); ++i) {
  }
  EXPECT_NE(job->finish_reason, FinishReason::none);
  return deltas;
}

TEST(SlotRecord, SaveEraseRestoreGivesTheSameStateBitForBit) {
  auto model = model_load(kModel);
  ASSERT_TRUE(model.ok()) << model.error();
  auto tokenizer = Tokenizer::load(kModel + "/tokenizer.json");
  ASSERT_TRUE(tokenizer.ok());
  const int V = (*model)->config.vocab_size;
  runtime::CpuSequenceSlots slots(**model, 1, 1);
  Metrics metrics;
  PromptCache cache(256u << 20);
  SchedulerOptions options;
  options.cache = &cache;
  options.prefill_chunk = 4;  // the prompt in two calls
  Scheduler scheduler(slots, *tokenizer, metrics, options);

  GenerationParams a;
  a.prompt = {0, 48, 1785, 1278, 262, 837};
  a.max_tokens = 5;
  a.top_logprobs = 0;
  std::vector<int32_t> generated;
  for (const Delta& d : run(scheduler, a))
    for (const auto& t : d.tokens) generated.push_back(t.id);
  ASSERT_EQ(generated.size(), 5u);

  const SlotActionResult saved = scheduler.slot_save(0);
  ASSERT_EQ(saved.status, 200) << saved.error;
  std::vector<int32_t> expected_tokens = a.prompt;
  expected_tokens.insert(expected_tokens.end(), generated.begin(), generated.end() - 1);
  EXPECT_EQ(saved.record.tokens, expected_tokens);
  EXPECT_EQ(saved.record.calls, (std::vector<int>{4, 2, 0, 0, 0, 0}));
  ASSERT_EQ(scheduler.slot_erase(0).status, 200);
  EXPECT_EQ(scheduler.slot_save(0).status, 400);  // nothing left

  // Something else runs on the slot, then the record comes back.
  GenerationParams other = a;
  other.prompt = {0, 7, 7, 7};
  run(scheduler, other);
  const SlotActionResult restored = scheduler.slot_restore(0, saved.record);
  ASSERT_EQ(restored.status, 200) << restored.error;

  // A prompt extending the record starts from the restored state (cached_tokens) and sees the
  // logits the original state gives: the reference replays the original calls directly.
  GenerationParams next = a;
  next.prompt = saved.record.tokens;
  next.prompt.push_back(13);
  next.max_tokens = 1;
  next.top_logprobs = 5;
  auto job = std::make_shared<Job>(next);
  ASSERT_EQ(scheduler.submit(job), Scheduler::Submitted::accepted);
  std::vector<Delta> deltas;
  for (int i = 0; i < 3000 && !job->wait(std::chrono::milliseconds(20), &deltas); ++i) {
  }
  EXPECT_EQ(job->cached_tokens, (int)saved.record.tokens.size());
  ASSERT_EQ(deltas.size(), 1u);
  ASSERT_EQ(deltas[0].tokens.size(), 1u);

  runtime::CpuSequenceSlots reference(**model, 1, 1);
  std::vector<float> logits(V);
  const auto& t = saved.record.tokens;
  ASSERT_TRUE(reference.prefill(0, t.data(), 4, logits.data()).ok());
  ASSERT_TRUE(reference.prefill(0, t.data() + 4, 2, logits.data()).ok());
  const int zero = 0;
  for (size_t i = 6; i < t.size(); ++i)
    ASSERT_TRUE(reference.decode(&zero, &t[i], 1, logits.data()).ok());
  const int32_t last = 13;
  ASSERT_TRUE(reference.prefill(0, &last, 1, logits.data()).ok());
  const TokenLogprob& got = deltas[0].tokens[0];
  EXPECT_EQ(got.id, runtime::argmax(logits.data(), V));  // a greedy request
  EXPECT_EQ(got.logprob, log_softmax_at(logits.data(), V, got.id));
  for (const auto& [id, lp] : got.top) EXPECT_EQ(lp, log_softmax_at(logits.data(), V, id)) << id;

  // Records that do not add up are refused.
  SlotRecord bad = saved.record;
  bad.calls.push_back(0);
  EXPECT_EQ(scheduler.slot_restore(0, bad).status, 400);
  bad = saved.record;
  bad.tokens[1] = V + 5;
  EXPECT_EQ(scheduler.slot_restore(0, bad).status, 400);
  EXPECT_EQ(scheduler.slot_restore(3, saved.record).status, 400);
}

}  // namespace
}  // namespace golinear::serve
