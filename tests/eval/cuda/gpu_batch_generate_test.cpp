// Batched greedy generation on the GPU (runtime::generate_batch over
// runtime::cuda::GpuSequenceSlots: the prompts of the reset slots in one packed prefill
// (prefill_batch, gpu_prefill_batch), then gpu_decode_batch steps whose batch shrinks and
// refills as sequences end) against one sequence at a time (eval::greedy_generate over
// runtime::cuda::gpu_sequences: gpu_prefill, then gpu_decode), on a random head_dim-64 model:
// all softmax, all hybrid (a captured graph per batch size) and mixed. Five prompts of different
// lengths and budgets, a stop id that ends some early (chosen from the unstopped runs), 1, 3 and
// 8 slots; with 3 and 8 the first prompts are prefilled packed.
//
// The packed prefill's and the batched step's logits can differ from the one-sequence run's in
// the last bits (their products have other sizes), so the rule is the GPU generation test's:
// while a request's tokens agree with the one-sequence run's, both runs' logits are those of the
// same prefix: the prefill row within nmse 1e-4 (the bound of the slots' prefill_batch test),
// every decode row within nmse 3e-3 (bf16; a slot reading another's state or a stale one gives
// ≥ 1e-1); the chosen tokens must be equal unless the one-sequence logits' top two are closer
// than twice the largest logit difference of that step (a near-tie the batch may flip), after
// which the request is not compared further. A request with no near-tie must match in full
// (length included), and at least a third of the tokens must have been compared.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "eval/generation_eval.h"
#include "kernels/cuda/cuda_test_util.h"
#include "model/cuda/gpu_model.h"
#include "model/cuda/random_models.h"
#include "runtime/cuda/gpu_sequences.h"
#include "runtime/cuda/sequence_slots.h"
#include "runtime/generate.h"

namespace golinear {
namespace {

using kernels::test::compare;

// Forwards to the GPU slots and keeps, per prompt prefilled into a slot, the logits row of each
// token chosen for it (the prefill's, then one per decode step).
class RecordingSlots final : public runtime::SequenceSlots {
 public:
  explicit RecordingSlots(runtime::SequenceSlots& inner) : inner_(inner), prompt_(inner.slots()) {}
  int slots() const override { return inner_.slots(); }
  int vocab_size() const override { return inner_.vocab_size(); }
  const char* device() const override { return inner_.device(); }
  bool batched_kernels() const override { return inner_.batched_kernels(); }
  Status reset(int slot) override { return inner_.reset(slot); }
  Status prefill(int slot, const int32_t* ids, int T, float* last_logits) override {
    GL_TRY(inner_.prefill(slot, ids, T, last_logits));
    record_prefill({slot, ids, T, last_logits});
    return ok_status();
  }
  std::vector<Status> prefill_batch(const std::vector<runtime::PrefillChunk>& chunks) override {
    std::vector<Status> statuses = inner_.prefill_batch(chunks);
    int packable = 0;  // prompts of ≥ 2 tokens: what the GPU slots pack
    for (size_t i = 0; i < chunks.size(); ++i) {
      if (statuses[i].ok()) record_prefill(chunks[i]);
      packable += chunks[i].T >= 2;
    }
    max_prefill_batch = std::max(max_prefill_batch, packable);
    return statuses;
  }
  Status decode(const int* slots, const int32_t* ids, int B, float* logits) override {
    GL_TRY(inner_.decode(slots, ids, B, logits));
    const int V = vocab_size();
    for (int b = 0; b < B; ++b)
      rows[prompt_[slots[b]]].emplace_back(logits + (size_t)b * V, logits + (size_t)(b + 1) * V);
    max_batch = std::max(max_batch, B);
    return ok_status();
  }
  size_t slot_bytes(int slot) const override { return inner_.slot_bytes(slot); }

  std::map<std::vector<int32_t>, std::vector<std::vector<float>>> rows;
  int max_batch = 0, max_prefill_batch = 0;

 private:
  void record_prefill(const runtime::PrefillChunk& c) {
    prompt_[c.slot].assign(c.ids, c.ids + c.T);
    const float* row = c.last_logits;
    rows[prompt_[c.slot]].assign(1, std::vector<float>(row, row + vocab_size()));
  }
  runtime::SequenceSlots& inner_;
  std::vector<std::vector<int32_t>> prompt_;
};

struct Reference {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> rows;  // the logits each token was chosen from
};

// One sequence at a time on the GPU, greedy, keeping every step's logits.
Reference one_sequence(golinear::model::cuda::GpuModel& gpu, int V,
                       const runtime::BatchRequest& request, const std::vector<int>& stop_ids) {
  Reference ref;
  const auto& prompt = request.prompt;
  auto step = golinear::runtime::cuda::gpu_sequences(gpu)((long)prompt.size() + request.max_new_tokens);
  EXPECT_TRUE(step.ok()) << step.error();
  if (!step.ok()) return ref;
  std::vector<float> logits(V);
  EXPECT_TRUE((*step)(prompt.data(), (int)prompt.size(), logits.data()).ok());
  for (int i = 0; i < request.max_new_tokens; ++i) {
    ref.rows.push_back(logits);
    int32_t next = runtime::argmax(logits.data(), V);
    ref.tokens.push_back(next);
    if (std::find(stop_ids.begin(), stop_ids.end(), next) != stop_ids.end()) break;
    if (i + 1 < request.max_new_tokens) {
      EXPECT_TRUE((*step)(&next, 1, logits.data()).ok());
    }
  }
  return ref;
}

void check_batched(Model& cpu, const char* what) {
  auto gpu = golinear::model::cuda::gpu_model_upload(cpu);
  ASSERT_TRUE(gpu.ok()) << gpu.error();
  const int V = cpu.config.vocab_size;
  const int lengths[] = {9, 40, 23, 64, 17}, budgets[] = {24, 10, 30, 16, 20};
  std::vector<runtime::BatchRequest> requests;
  long max_context = 0;
  for (int i = 0; i < 5; ++i) {
    requests.push_back({test::test_tokens(lengths[i], V, 40 + i), budgets[i]});
    max_context = std::max(max_context, (long)(lengths[i] + budgets[i]));
  }
  // Stop id: a token request 2's unstopped run chooses after its first two steps and that
  // another request's unstopped run never chooses (a random model may repeat a few tokens), so
  // that some requests end early and some run to their budget.
  std::vector<std::vector<int32_t>> free_runs;
  for (const auto& request : requests) free_runs.push_back(one_sequence(**gpu, V, request, {}).tokens);
  std::vector<int> stop_ids;
  for (size_t s = 2; s < free_runs[2].size() && stop_ids.empty(); ++s) {
    const int32_t t = free_runs[2][s];
    if (std::find(free_runs[2].begin(), free_runs[2].begin() + 2, t) != free_runs[2].begin() + 2) continue;
    for (const auto& run : free_runs)
      if (std::find(run.begin(), run.end(), t) == run.end()) {
        stop_ids = {t};
        break;
      }
  }
  std::printf("  %-8s stop id %d\n", what, stop_ids.empty() ? -1 : stop_ids[0]);
  std::vector<Reference> refs;
  for (const auto& request : requests) {
    refs.push_back(one_sequence(**gpu, V, request, stop_ids));
    // The same tokens as eval's greedy loop over the same sequences.
    auto eval_tokens = eval::greedy_generate(golinear::runtime::cuda::gpu_sequences(**gpu), V,
                                             request.prompt, request.max_new_tokens, stop_ids);
    ASSERT_TRUE(eval_tokens.ok()) << eval_tokens.error();
    EXPECT_EQ(*eval_tokens, refs.back().tokens) << what;
  }
  if (!stop_ids.empty()) {
    EXPECT_LT(refs[2].tokens.size(), (size_t)budgets[2]) << what;
  }
  for (int slots : {1, 3, 8}) {
    auto backend = runtime::cuda::GpuSequenceSlots::create(**gpu, slots, max_context);
    ASSERT_TRUE(backend.ok()) << backend.error();
    RecordingSlots recording(**backend);
    auto got = runtime::generate_batch(recording, requests, stop_ids);
    ASSERT_TRUE(got.ok()) << what << ": " << got.error();
    ASSERT_EQ(got->size(), requests.size());
    EXPECT_GE(recording.max_batch, std::min(slots, 2)) << what;
    EXPECT_GE(recording.max_prefill_batch, std::min(slots, 2)) << what;
    int compared = 0, total = 0, near_ties = 0;
    double worst = 0;
    for (size_t r = 0; r < requests.size(); ++r) {
      const Reference& ref = refs[r];
      const std::vector<int32_t>& tokens = (*got)[r];
      const auto& rows = recording.rows[requests[r].prompt];
      ASSERT_EQ(rows.size(), tokens.size()) << what << " request " << r;
      total += (int)ref.tokens.size();
      bool tied = false;
      for (size_t s = 0; s < tokens.size() && s < ref.tokens.size(); ++s) {
        const auto e = compare(rows[s].data(), ref.rows[s].data(), V);
        worst = std::max(worst, s > 0 ? e.nmse : 0.0);
        EXPECT_LT(e.nmse, s == 0 ? 1e-4 : 3e-3) << what << " slots " << slots << " request " << r << " step " << s;
        ++compared;
        if (tokens[s] == ref.tokens[s]) continue;
        std::vector<float> sorted = ref.rows[s];
        std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
        tied = sorted[0] - sorted[1] < 2 * e.max_abs;
        EXPECT_TRUE(tied) << what << " slots " << slots << " request " << r << " step " << s
                          << ": token " << tokens[s] << " instead of " << ref.tokens[s]
                          << " (top-two gap " << sorted[0] - sorted[1] << ", max logit difference "
                          << e.max_abs << ")";
        break;
      }
      near_ties += tied;
      if (!tied) {
        EXPECT_EQ(tokens, ref.tokens) << what << " slots " << slots << " request " << r;
      }
    }
    std::printf("  %-8s %d slots: %d/%d tokens compared, %d near-ties, worst decode nmse %.3e\n",
                what, slots, compared, total, near_ties, worst);
    EXPECT_GE(3 * compared, total) << what << ": too few tokens compared to mean anything";
  }
}

TEST(GpuBatchGenerate, SoftmaxMatchesOneSequence) {
  REQUIRE_GPU();
  auto cpu = test::random_model(test::small_llama_config(), 31);
  check_batched(*cpu, "softmax");
}

TEST(GpuBatchGenerate, HybridMatchesOneSequence) {
  REQUIRE_GPU();
  auto cpu = test::random_model(test::small_llama_config(), 32);
  cpu->mixers = test::linearized_stack(*cpu, {}, 7);
  check_batched(*cpu, "hybrid");
}

TEST(GpuBatchGenerate, MixedMatchesOneSequence) {
  REQUIRE_GPU();
  auto cpu = test::random_model(test::small_llama_config(), 33);
  cpu->mixers = test::linearized_stack(*cpu, {0}, 8);
  check_batched(*cpu, "mixed");
}

}  // namespace
}  // namespace golinear
