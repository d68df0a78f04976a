// The scheduler (serve/scheduler.h) on a fake backend whose logits are a hash of each slot's
// token history: every decode step advances all generating sequences together, each request
// gives the tokens it gives alone, the wait queue is bounded, a cancelled request leaves, and
// the prompt cache restores the longest prefix without changing the output.
#include "serve/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>

namespace golinear::serve {
namespace {

constexpr int kVocab = 64;

// logits (V) of a history: a fixed pseudo-random function of the tokens and the candidate.
void history_logits(const std::vector<int32_t>& history, float* logits) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : history) h = (h ^ (uint64_t)t) * 1099511628211ull;
  for (int v = 0; v < kVocab; ++v) {
    uint64_t z = h + (uint64_t)v * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z ^= z >> 31;
    logits[v] = (float)(z >> 40) / (float)(1 << 24) * 4.0f;
  }
}

class FakeSnapshot final : public runtime::StateSnapshot {
 public:
  explicit FakeSnapshot(std::vector<int32_t> h) : history(std::move(h)) {}
  size_t bytes() const override { return 100; }
  long position() const override { return (long)history.size(); }
  std::vector<int32_t> history;
};

class FakeBackend final : public runtime::SequenceSlots {
 public:
  explicit FakeBackend(int slots) : history_(slots) {}
  int slots() const override { return (int)history_.size(); }
  int vocab_size() const override { return kVocab; }
  const char* device() const override { return "fake"; }
  bool batched_kernels() const override { return true; }
  Status reset(int slot) override {
    history_[slot].clear();
    return ok_status();
  }
  Status prefill(int slot, const int32_t* ids, int T, float* last_logits) override {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ++prefills_waiting_;
      changed_.notify_all();
      changed_.wait(lock, [&] { return open_; });
      --prefills_waiting_;
      prefilled_tokens += T;
      prefill_calls.push_back(T);
    }
    history_[slot].insert(history_[slot].end(), ids, ids + T);
    history_logits(history_[slot], last_logits);
    return ok_status();
  }
  Status decode(const int* slots, const int32_t* ids, int B, float* logits) override {
    batch_sizes.push_back(B);
    for (int b = 0; b < B; ++b) {
      history_[slots[b]].push_back(ids[b]);
      history_logits(history_[slots[b]], logits + (size_t)b * kVocab);
    }
    return ok_status();
  }
  std::vector<Status> prefill_batch(const std::vector<runtime::PrefillChunk>& chunks) override {
    prefill_batches.push_back((int)chunks.size());
    return runtime::SequenceSlots::prefill_batch(chunks);
  }
  Status decode_greedy(const int* slots, const int32_t* ids, int B, int32_t* next) override {
    greedy_steps.push_back(B);
    return runtime::SequenceSlots::decode_greedy(slots, ids, B, next);
  }
  size_t slot_bytes(int) const override { return 0; }
  bool chunked_prefill() const override { return chunked; }
  bool can_snapshot() const override { return true; }
  std::shared_ptr<const runtime::StateSnapshot> snapshot(int slot) const override {
    return std::make_shared<FakeSnapshot>(history_[slot]);
  }
  Status restore(int slot, const runtime::StateSnapshot& s) override {
    history_[slot] = dynamic_cast<const FakeSnapshot&>(s).history;
    return ok_status();
  }

  // Prefill blocks while the gate is closed; wait_for_prefill returns once one is blocked.
  void set_open(bool open) {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = open;
    changed_.notify_all();
  }
  void wait_for_prefill() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return prefills_waiting_ > 0; });
  }

  std::vector<int> batch_sizes;  // written by the scheduler thread only
  std::vector<int> greedy_steps;  // B of each decode_greedy step
  std::vector<int> prefill_batches;  // chunks of each prefill_batch call
  long prefilled_tokens = 0;
  std::vector<int> prefill_calls;  // T of each prefill, in order
  bool chunked = true;             // chunked_prefill(): false plays the GPU

 private:
  std::vector<std::vector<int32_t>> history_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = true;
  int prefills_waiting_ = 0;
};

Tokenizer tiny_tokenizer() {
  auto t = Tokenizer::load(std::string(GOLINEAR_MODEL_DIR) + "/tiny-llama3-25m/tokenizer.json");
  EXPECT_TRUE(t.ok()) << t.error();
  return std::move(t).value();
}

GenerationParams params(std::vector<int32_t> prompt, int max_tokens, uint64_t seed) {
  GenerationParams p;
  p.prompt = std::move(prompt);
  p.max_tokens = max_tokens;
  p.sampler = {0.8f, 0.95f, seed, 0, 0.0f};
  p.top_logprobs = 0;  // the deltas then carry the token ids
  return p;
}

// The tokens a request gets when it runs alone, by the plain loop.
std::vector<int32_t> reference_tokens(const GenerationParams& p) {
  runtime::Sampler sampler(p.sampler);
  std::vector<int32_t> history = p.prompt, out;
  std::vector<float> logits(kVocab);
  for (int i = 0; i < p.max_tokens; ++i) {
    history_logits(history, logits.data());
    out.push_back(sampler.sample(logits.data(), kVocab));
    history.push_back(out.back());
  }
  return out;
}

std::vector<Delta> wait_deltas(Job& job) {
  std::vector<Delta> deltas;
  // Bounded: 1500 × 20 ms = 30 s at most.
  for (int i = 0; i < 1500 && !job.wait(std::chrono::milliseconds(20), &deltas); ++i) {
  }
  EXPECT_NE(job.finish_reason, FinishReason::none) << "the job did not finish within 30 s";
  return deltas;
}

std::string text_of(const std::vector<Delta>& deltas) {
  std::string text;
  for (const Delta& d : deltas) text += d.text;
  return text;
}

std::vector<int32_t> wait_tokens(Job& job) {
  const std::vector<Delta> deltas = wait_deltas(job);
  std::vector<int32_t> ids;
  for (const Delta& d : deltas)
    for (const TokenLogprob& t : d.tokens) ids.push_back(t.id);
  return ids;
}

TEST(Scheduler, DecodeStepsAdvanceAllRunningSequencesAndEachGetsItsOwnTokens) {
  Tokenizer tokenizer = tiny_tokenizer();
  FakeBackend backend(2);
  Metrics metrics;
  std::vector<std::shared_ptr<Job>> jobs;
  {
    // Every job is queued before the first prefill ends (the gate): on a loaded machine the
    // first job could otherwise finish before the next one arrives, and no step would batch.
    backend.set_open(false);
    Scheduler scheduler(backend, tokenizer, metrics, {});
    for (int i = 0; i < 5; ++i) {
      jobs.push_back(std::make_shared<Job>(params({1, 2, 3 + i}, 6 + 3 * i, 10 + i)));
      ASSERT_EQ(scheduler.submit(jobs.back()), Scheduler::Submitted::accepted);
    }
    backend.set_open(true);
    for (size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_EQ(wait_tokens(*jobs[i]), reference_tokens(jobs[i]->params)) << "job " << i;
      EXPECT_EQ(jobs[i]->finish_reason, FinishReason::length);
      EXPECT_EQ(jobs[i]->completion_tokens, jobs[i]->params.max_tokens);
      EXPECT_EQ(jobs[i]->cached_tokens, 0);
    }
  }
  // Two slots: steps of two sequences happened, never more.
  EXPECT_EQ(*std::max_element(backend.batch_sizes.begin(), backend.batch_sizes.end()), 2);
  EXPECT_GT(std::count(backend.batch_sizes.begin(), backend.batch_sizes.end(), 2), 5);
  EXPECT_EQ(metrics.generation_tokens.load(), 6u + 9 + 12 + 15 + 18);
}

// The prompts of the slots admitted together reach the backend in one prefill_batch call (a
// GPU packs them into one forward); each request still gets its own tokens.
TEST(Scheduler, PromptsAdmittedTogetherArePrefilledInOneCall) {
  Tokenizer tokenizer = tiny_tokenizer();
  FakeBackend backend(4);
  Metrics metrics;
  std::vector<std::shared_ptr<Job>> jobs;
  {
    backend.set_open(false);
    Scheduler scheduler(backend, tokenizer, metrics, {});
    jobs.push_back(std::make_shared<Job>(params({1, 2, 3}, 4, 1)));
    ASSERT_EQ(scheduler.submit(jobs.back()), Scheduler::Submitted::accepted);
    backend.wait_for_prefill();  // the first job's prefill holds the scheduler
    for (int i = 1; i < 4; ++i) {
      jobs.push_back(std::make_shared<Job>(params({4, 5 + i, 6, 7 + i}, 5, 10 + i)));
      ASSERT_EQ(scheduler.submit(jobs.back()), Scheduler::Submitted::accepted);
    }
    backend.set_open(true);
    for (size_t i = 0; i < jobs.size(); ++i)
      EXPECT_EQ(wait_tokens(*jobs[i]), reference_tokens(jobs[i]->params)) << "job " << i;
  }
  ASSERT_GE(backend.prefill_batches.size(), 2u);
  EXPECT_EQ(backend.prefill_batches[0], 1);
  EXPECT_EQ(backend.prefill_batches[1], 3);  // the three queued behind the first, in one call
}

// The rows of a decode step choose their tokens in parallel: each request's tokens and text are
// those it gets alone, whatever the number of sampling threads, for unrestricted and restricted
// sampling alike.
TEST(Scheduler, ParallelSamplingGivesTheSameTextForAnyThreadCount) {
  Tokenizer tokenizer = tiny_tokenizer();
  const std::vector<runtime::SamplerOptions> samplers = {
      {1.0f, 1.0f, 0, 0, 0.0f},   {0.8f, 0.9f, 0, 0, 0.0f}, {1.2f, 1.0f, 0, 5, 0.0f},
      {1.0f, 0.95f, 0, 0, 0.05f}, {0.0f, 1.0f, 0, 0, 0.0f}, {2.0f, 0.5f, 0, 20, 0.1f}};
  std::vector<std::string> first_texts;
  for (int threads : {1, 3}) {
    FakeBackend backend(6);
    Metrics metrics;
    SchedulerOptions options;
    options.sample_threads = threads;
    std::vector<std::shared_ptr<Job>> jobs;
    std::vector<std::string> texts;
    {
      backend.set_open(false);  // every job queued before the first prefill ends
      Scheduler scheduler(backend, tokenizer, metrics, options);
      for (size_t i = 0; i < samplers.size(); ++i) {
        GenerationParams p = params({1, 2, 3 + (int)i}, 20, 100 + i);
        p.sampler = samplers[i];
        p.sampler.seed = 100 + i;
        jobs.push_back(std::make_shared<Job>(p));
        ASSERT_EQ(scheduler.submit(jobs.back()), Scheduler::Submitted::accepted);
      }
      backend.set_open(true);
      for (size_t i = 0; i < jobs.size(); ++i) {
        const std::vector<Delta> deltas = wait_deltas(*jobs[i]);
        ASSERT_EQ(jobs[i]->finish_reason, FinishReason::length) << "job " << i;
        std::vector<int32_t> ids;
        for (const Delta& d : deltas)
          for (const TokenLogprob& t : d.tokens) ids.push_back(t.id);
        EXPECT_EQ(ids, reference_tokens(jobs[i]->params)) << "job " << i << ", threads " << threads;
        texts.push_back(text_of(deltas));
      }
    }
    EXPECT_GT(*std::max_element(backend.batch_sizes.begin(), backend.batch_sizes.end()), 3);
    if (first_texts.empty())
      first_texts = texts;
    else
      EXPECT_EQ(texts, first_texts) << "threads " << threads;
  }
}

// A step whose sequences are all greedy without logprobs asks the backend for the argmax rows
// only (decode_greedy: a GPU copies B ids instead of B·V logits); the text is the plain loop's.
// One sequence that samples or asks for logprobs makes every step of its time a logits step.
TEST(Scheduler, GreedyStepsAskOnlyForTheArgmax) {
  Tokenizer tokenizer = tiny_tokenizer();
  for (bool mixed : {false, true}) {
    FakeBackend backend(3);
    Metrics metrics;
    std::vector<std::shared_ptr<Job>> jobs;
    {
      backend.set_open(false);
      Scheduler scheduler(backend, tokenizer, metrics, {});
      for (int i = 0; i < 3; ++i) {
        GenerationParams p = params({1, 2, 5 + i}, 12, 7 + i);
        p.sampler.temperature = 0.0f;
        p.top_logprobs = -1;
        if (mixed && i == 1) p.top_logprobs = 0;  // logprobs need the logits
        jobs.push_back(std::make_shared<Job>(p));
        ASSERT_EQ(scheduler.submit(jobs.back()), Scheduler::Submitted::accepted);
      }
      backend.set_open(true);
      for (size_t i = 0; i < jobs.size(); ++i) {
        const std::string text = text_of(wait_deltas(*jobs[i]));
        ASSERT_EQ(jobs[i]->finish_reason, FinishReason::length) << "job " << i;
        EXPECT_EQ(text, tokenizer.decode(reference_tokens(jobs[i]->params), /*skip_special=*/true))
            << "job " << i << (mixed ? " (mixed)" : "");
      }
    }
    ASSERT_FALSE(backend.batch_sizes.empty());
    if (mixed) {
      // Steps with the logprobs job ran as logits steps; all three run together at first.
      EXPECT_LT(backend.greedy_steps.size(), backend.batch_sizes.size());
      EXPECT_EQ(std::count(backend.greedy_steps.begin(), backend.greedy_steps.end(), 3), 0);
    } else {
      EXPECT_EQ(backend.greedy_steps.size(), backend.batch_sizes.size());
    }
  }
}

TEST(Scheduler, BoundedQueueAndCancellation) {
  Tokenizer tokenizer = tiny_tokenizer();
  FakeBackend backend(1);
  Metrics metrics;
  SchedulerOptions options;
  options.max_queue = 1;
  Scheduler scheduler(backend, tokenizer, metrics, options);
  backend.set_open(false);
  auto running = std::make_shared<Job>(params({1, 2}, 4, 1));
  auto waiting = std::make_shared<Job>(params({1, 3}, 4, 1));
  auto refused = std::make_shared<Job>(params({1, 4}, 4, 1));
  ASSERT_EQ(scheduler.submit(running), Scheduler::Submitted::accepted);
  backend.wait_for_prefill();  // `running` holds the slot
  ASSERT_EQ(scheduler.submit(waiting), Scheduler::Submitted::accepted);
  EXPECT_EQ(scheduler.submit(refused), Scheduler::Submitted::queue_full);
  EXPECT_EQ(scheduler.waiting(), 1);
  waiting->cancel();
  // A waiting request whose client left holds no place: the next one is queued in its stead,
  // and the cancelled one finishes (cancelled) without running.
  auto in_its_stead = std::make_shared<Job>(params({1, 7}, 2, 1));
  EXPECT_EQ(scheduler.submit(in_its_stead), Scheduler::Submitted::accepted);
  EXPECT_EQ(scheduler.waiting(), 1);
  wait_tokens(*waiting);
  EXPECT_EQ(waiting->finish_reason, FinishReason::cancelled);
  EXPECT_EQ(waiting->completion_tokens, 0);
  auto long_job = std::make_shared<Job>(params({1, 5}, 1000000, 1));
  backend.set_open(true);
  EXPECT_EQ(wait_tokens(*running).size(), 4u);
  EXPECT_EQ(wait_tokens(*in_its_stead), reference_tokens(in_its_stead->params));
  // A running request cancelled mid-generation stops and frees the slot.
  ASSERT_EQ(scheduler.submit(long_job), Scheduler::Submitted::accepted);
  std::vector<Delta> some;
  for (int i = 0; i < 1500 && some.empty(); ++i)
    long_job->wait(std::chrono::milliseconds(20), &some);
  ASSERT_FALSE(some.empty());
  long_job->cancel();
  wait_tokens(*long_job);
  EXPECT_EQ(long_job->finish_reason, FinishReason::cancelled);
  EXPECT_LT(long_job->completion_tokens, 1000000);
  auto after = std::make_shared<Job>(params({1, 6}, 3, 1));
  ASSERT_EQ(scheduler.submit(after), Scheduler::Submitted::accepted);
  EXPECT_EQ(wait_tokens(*after), reference_tokens(after->params));
}

TEST(Scheduler, PromptCacheRestoresTheLongestPrefixAndChangesNothing) {
  Tokenizer tokenizer = tiny_tokenizer();
  FakeBackend backend(1);
  Metrics metrics;
  PromptCache cache(1 << 20);
  SchedulerOptions options;
  options.cache = &cache;
  options.prefill_chunk = 3;  // prompts longer than this are prefilled over several iterations
  Scheduler scheduler(backend, tokenizer, metrics, options);
  const std::vector<int32_t> first = {1, 2, 3, 4, 5, 6, 7};
  std::vector<int32_t> second = first;
  second.insert(second.end(), {8, 9, 10, 11});
  auto a = std::make_shared<Job>(params(first, 5, 3));
  ASSERT_EQ(scheduler.submit(a), Scheduler::Submitted::accepted);
  EXPECT_EQ(wait_tokens(*a), reference_tokens(a->params));
  EXPECT_EQ(a->cached_tokens, 0);
  const long prefilled = backend.prefilled_tokens;
  EXPECT_EQ(prefilled, 7);
  auto b = std::make_shared<Job>(params(second, 5, 3));
  ASSERT_EQ(scheduler.submit(b), Scheduler::Submitted::accepted);
  EXPECT_EQ(wait_tokens(*b), reference_tokens(b->params));
  EXPECT_EQ(b->cached_tokens, 7);
  EXPECT_EQ(backend.prefilled_tokens - prefilled, 4);
  // The same prompt again: nothing to prefill, the same tokens.
  auto c = std::make_shared<Job>(params(second, 5, 3));
  ASSERT_EQ(scheduler.submit(c), Scheduler::Submitted::accepted);
  EXPECT_EQ(wait_tokens(*c), reference_tokens(c->params));
  EXPECT_EQ(c->cached_tokens, (int)second.size());
  EXPECT_EQ(backend.prefilled_tokens - prefilled, 4);
}

// A long prompt's state is kept every snapshot_every tokens (its chunks cut there), so a prompt
// sharing only part of it restores the last such state before they differ; a backend that
// prefills an empty slot whole (chunked_prefill() false, the GPU) keeps prompt ends only.
TEST(Scheduler, PromptCacheKeepsTheStateEverySnapshotEveryTokens) {
  Tokenizer tokenizer = tiny_tokenizer();
  for (const bool chunked : {true, false}) {
    FakeBackend backend(1);
    backend.chunked = chunked;
    Metrics metrics;
    PromptCache cache(1 << 20);
    SchedulerOptions options;
    options.cache = &cache;
    options.prefill_chunk = 3;
    options.snapshot_every = 4;
    Scheduler scheduler(backend, tokenizer, metrics, options);
    const std::vector<int32_t> first = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    const std::vector<int32_t> second = {1, 2, 3, 4, 5, 6, 7, 8, 9, 20, 21};
    auto a = std::make_shared<Job>(params(first, 3, 5));
    ASSERT_EQ(scheduler.submit(a), Scheduler::Submitted::accepted);
    EXPECT_EQ(wait_tokens(*a), reference_tokens(a->params));
    if (chunked) {  // 3, then cut at 4; 3, cut at 8; the rest
      EXPECT_EQ(backend.prefill_calls, (std::vector<int>{3, 1, 3, 1, 2}));
      EXPECT_EQ(cache.stats().entries, 3u);  // after 4, 8 and 10 tokens
    } else {
      EXPECT_EQ(backend.prefill_calls, (std::vector<int>{10}));
      EXPECT_EQ(cache.stats().entries, 1u);
    }
    auto b = std::make_shared<Job>(params(second, 3, 5));
    ASSERT_EQ(scheduler.submit(b), Scheduler::Submitted::accepted);
    EXPECT_EQ(wait_tokens(*b), reference_tokens(b->params)) << "chunked " << chunked;
    EXPECT_EQ(b->cached_tokens, chunked ? 8 : 0);
    EXPECT_EQ(backend.prefilled_tokens, 10 + (chunked ? 3 : 11));
  }
}

// A backend that continues a restored state token by token (chunked_prefill() false, the GPU)
// takes a cached prefix only when at most stepped_rest_max prompt tokens remain after it; a
// longer rest is prefilled with the prefix, whole, in one call.
TEST(Scheduler, AStateContinuedTokenByTokenIsRestoredOnlyForAShortRest) {
  Tokenizer tokenizer = tiny_tokenizer();
  for (const int rest_max : {2, 1}) {
    FakeBackend backend(1);
    backend.chunked = false;
    Metrics metrics;
    PromptCache cache(1 << 20);
    SchedulerOptions options;
    options.cache = &cache;
    options.stepped_rest_max = rest_max;
    Scheduler scheduler(backend, tokenizer, metrics, options);
    const std::vector<int32_t> first = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    const std::vector<int32_t> second = {1, 2, 3, 4, 5, 6, 7, 8, 9, 20, 21};
    auto a = std::make_shared<Job>(params(first, 3, 5));
    ASSERT_EQ(scheduler.submit(a), Scheduler::Submitted::accepted);
    EXPECT_EQ(wait_tokens(*a), reference_tokens(a->params));
    auto b = std::make_shared<Job>(params(second, 3, 5));
    ASSERT_EQ(scheduler.submit(b), Scheduler::Submitted::accepted);
    EXPECT_EQ(wait_tokens(*b), reference_tokens(b->params)) << "rest max " << rest_max;
    if (rest_max == 2) {  // the 2 tokens after the cached 9
      EXPECT_EQ(b->cached_tokens, 9);
      EXPECT_EQ(backend.prefill_calls, (std::vector<int>{9, 2}));
    } else {
      EXPECT_EQ(b->cached_tokens, 0);
      EXPECT_EQ(backend.prefill_calls, (std::vector<int>{9, 11}));
    }
  }
}

}  // namespace
}  // namespace golinear::serve
