// Batched generation over sequence slots (runtime::generate_batch) against the one-sequence loop
// (runtime::generate with the same sampler) on the CPU: the random-llama fixture as the teacher
// and linearized (GDN, layer 1 kept full). Prompts of different lengths and budgets, stop ids
// that end some sequences early, greedy and sampled requests (each its own seed; a greedy one
// among sampled ones), run with 1, 3 and more slots than requests: every request's tokens equal
// the one-sequence run's, bit for bit (CpuSequenceSlots' decode rows are each sequence's alone);
// the free slots' prompts go to the backend together (one prefill_batch call per round).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <utility>

#include "model/linearization.h"
#include "model/transformer.h"
#include "runtime/cpu_sequence_slots.h"
#include "runtime/generate.h"

namespace golinear {
namespace {

const std::string kFixtures = std::string(GOLINEAR_TEST_DATA) + "/fixtures/";

std::unique_ptr<Model> load_model(const std::string& kind) {
  auto model = model_load(kFixtures + "random-llama");
  EXPECT_TRUE(model.ok()) << model.error();
  if (!model.ok()) return nullptr;
  if (kind == "teacher") return std::move(*model);
  mixers::MixerOptions options;
  options.kind = mixers::MixerKind::gdn, options.sinks = 2, options.window = 3;
  auto stack = linearized_mixers(**model, options, /*keep_full=*/{1}, 5);
  EXPECT_TRUE(stack.ok()) << stack.error();
  if (!stack.ok()) return nullptr;
  (*model)->mixers = std::move(*stack);
  return std::move(*model);
}

std::vector<int32_t> prompt_of(int n, int V, int seed) {
  std::vector<int32_t> ids(n);
  for (int t = 0; t < n; ++t) ids[t] = (int32_t)(((long)t * 7919 + 131 * seed + 3) % V);
  return ids;
}

class BatchGenerateTest : public ::testing::TestWithParam<std::string> {};

// CPU slots that keep the size of each prefill_batch call.
class CountingSlots final : public runtime::SequenceSlots {
 public:
  CountingSlots(const Model& model, int slots) : inner_(model, slots) {}
  int slots() const override { return inner_.slots(); }
  int vocab_size() const override { return inner_.vocab_size(); }
  const char* device() const override { return inner_.device(); }
  bool batched_kernels() const override { return inner_.batched_kernels(); }
  Status reset(int slot) override { return inner_.reset(slot); }
  Status prefill(int slot, const int32_t* ids, int T, float* last_logits) override {
    ++single_prefills;
    return inner_.prefill(slot, ids, T, last_logits);
  }
  std::vector<Status> prefill_batch(const std::vector<runtime::PrefillChunk>& chunks) override {
    prefill_batches.push_back((int)chunks.size());
    prefill_tokens.push_back(0);
    for (const runtime::PrefillChunk& c : chunks) prefill_tokens.back() += c.T;
    return inner_.prefill_batch(chunks);
  }
  Status decode(const int* slots, const int32_t* ids, int B, float* logits) override {
    return inner_.decode(slots, ids, B, logits);
  }
  size_t slot_bytes(int slot) const override { return inner_.slot_bytes(slot); }

  std::vector<int> prefill_batches, prefill_tokens;  // chunks and tokens of each call
  int single_prefills = 0;

 private:
  runtime::CpuSequenceSlots inner_;
};

void expect_batches_equal_one_sequence(const Model& model, bool sampled) {
  const int V = model.config.vocab_size;
  const char* what = sampled ? "sampled" : "greedy";
  // Lengths and budgets differ, so that sequences end at different steps and slots are refilled
  // while others run; the budget 0 and 1 requests end at their prefill.
  const int lengths[] = {5, 31, 12, 1, 47, 20, 9};
  const int budgets[] = {18, 7, 24, 1, 12, 0, 16};
  std::vector<runtime::BatchRequest> requests;
  for (int i = 0; i < 7; ++i) {
    requests.push_back({prompt_of(lengths[i], V, i), budgets[i]});
    if (sampled && i != 4) requests.back().sampler = {0.9f, 0.95f, (uint64_t)(100 + i), 0, 0.0f};
  }
  // Stop ids: tokens the unstopped runs of requests 0 and 2 choose at their 4th and 6th steps.
  runtime::GenerateOptions free_run;
  free_run.max_new_tokens = 24;
  free_run.sampler = requests[0].sampler;
  const int32_t stop0 = runtime::generate(model, requests[0].prompt, free_run)[3];
  free_run.sampler = requests[2].sampler;
  const int32_t stop2 = runtime::generate(model, requests[2].prompt, free_run)[5];
  std::vector<int> stop_ids = {stop0, stop2};
  std::vector<std::vector<int32_t>> want;
  int stopped = 0, full = 0;
  for (const runtime::BatchRequest& request : requests) {
    runtime::GenerateOptions options;
    options.max_new_tokens = request.max_new_tokens;
    options.stop_ids = stop_ids;
    options.sampler = request.sampler;
    want.push_back(runtime::generate(model, request.prompt, options));
    stopped += (int)want.back().size() < request.max_new_tokens;
    full += request.max_new_tokens > 1 && (int)want.back().size() == request.max_new_tokens;
  }
  // The cases this test is about occur: sequences ended by a stop id and by their budget.
  ASSERT_GE(stopped, 2) << what;
  ASSERT_GE(full, 2) << what;
  // Prompts in prefill_batch calls of at most 16384 tokens (all of them together), then of fewer
  // than 40 tokens before their last prompt.
  const std::pair<int, int> runs[] = {{1, 16384}, {3, 16384}, {10, 16384}, {10, 40}};
  for (const auto& run : runs) {
    const int slots = run.first, max_prefill = run.second;
    CountingSlots backend(model, slots);
    std::vector<size_t> ended;
    auto got = runtime::generate_batch(
        backend, requests, stop_ids,
        [&](size_t i, const std::vector<int32_t>& tokens) {
          ended.push_back(i);
          EXPECT_EQ(tokens, want[i]) << what << " request " << i << " with " << slots << " slots";
        },
        max_prefill);
    ASSERT_TRUE(got.ok()) << got.error();
    ASSERT_EQ(got->size(), requests.size());
    for (size_t i = 0; i < requests.size(); ++i)
      EXPECT_EQ((*got)[i], want[i]) << what << ": request " << i << " with " << slots << " slots";
    EXPECT_EQ(ended.size(), requests.size());
    EXPECT_EQ(std::set<size_t>(ended.begin(), ended.end()).size(), requests.size());
    // Every prompt (6: request 5 has no budget) through prefill_batch: the first min(slots, 6)
    // in its first call unless the token cap splits them (5 + 31 + 12 = 48 tokens, the first
    // three prompts, reach 40).
    EXPECT_EQ(backend.single_prefills, 0);
    ASSERT_FALSE(backend.prefill_batches.empty());
    EXPECT_EQ(backend.prefill_batches[0], max_prefill == 40 ? 3 : std::min(slots, 6))
        << slots << " slots";
    int prefilled = 0;
    for (size_t c = 0; c < backend.prefill_batches.size(); ++c) {
      prefilled += backend.prefill_batches[c];
      EXPECT_LE(backend.prefill_tokens[c], max_prefill - 1 + 47) << slots << " slots";
    }
    EXPECT_EQ(prefilled, 6) << slots << " slots";
  }
}

TEST_P(BatchGenerateTest, EqualsOneSequenceForAnySlots) {
  auto model = load_model(GetParam());
  ASSERT_TRUE(model);
  expect_batches_equal_one_sequence(*model, /*sampled=*/false);
  expect_batches_equal_one_sequence(*model, /*sampled=*/true);
}

INSTANTIATE_TEST_SUITE_P(Models, BatchGenerateTest, ::testing::Values("teacher", "gdn"));

// A backend whose decode step fails: the error comes back, naming it.
class FailingSlots final : public runtime::SequenceSlots {
 public:
  int slots() const override { return 2; }
  int vocab_size() const override { return 4; }
  const char* device() const override { return "test"; }
  bool batched_kernels() const override { return true; }
  Status reset(int) override { return ok_status(); }
  Status prefill(int, const int32_t*, int, float* logits) override {
    std::fill(logits, logits + 4, 0.0f);
    logits[2] = 1.0f;
    return ok_status();
  }
  Status decode(const int*, const int32_t*, int, float*) override {
    return make_error("decode failed on purpose");
  }
  size_t slot_bytes(int) const override { return 0; }
};

TEST(BatchGenerate, BackendErrorComesBack) {
  FailingSlots backend;
  auto got = runtime::generate_batch(backend, {{{1, 2, 3}, 4}, {{3}, 4}}, {});
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.error().find("decode failed on purpose"), std::string::npos) << got.error();
  // One token each ends at the prefill: no decode step is needed.
  auto one = runtime::generate_batch(backend, {{{1, 2, 3}, 1}, {{3}, 1}, {{0}, 1}}, {});
  ASSERT_TRUE(one.ok()) << one.error();
  EXPECT_EQ(*one, (std::vector<std::vector<int32_t>>{{2}, {2}, {2}}));
}

}  // namespace
}  // namespace golinear
