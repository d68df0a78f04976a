// Continuous batching: one scheduler thread owns the slots of a runtime::SequenceSlots
// (runtime/sequence_slots.h). Each iteration it admits waiting requests into free slots (restoring
// the longest cached prompt prefix or starting from an empty state), prefills at most
// `prefill_chunk` prompt tokens in all, then advances every sequence that is generating by one
// token in one decode step. Requests beyond the slots wait in a bounded FIFO queue. A request
// cancelled by its client (disconnect) leaves its slot at the next iteration. Each request samples
// with its own seeded generator from its own sequence's logits, so its text does not depend on what
// else runs or ran on its slot.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/sequence_slots.h"
#include "serve/metrics.h"
#include "serve/prompt_cache.h"
#include "serve/text_output.h"
#include "tokenizer/tokenizer.h"

namespace golinear::serve {

struct GenerationParams {
  std::vector<int32_t> prompt;  // ≥ 1 token
  int max_tokens = 16;          // ≥ 1
  runtime::SamplerOptions sampler;
  std::vector<std::string> stop;  // stop strings
  std::vector<int32_t> stop_ids;  // stop tokens (end of sequence)
  int top_logprobs = -1;          // < 0: no logprobs; n ≥ 0: the chosen token's and n best
};

enum class FinishReason { none, stop, length, cancelled, error };
const char* to_string(FinishReason reason);

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // most likely first
};

// What the scheduler hands a request, in order: text to send (may be empty) and the tokens
// chosen since the last delta.
struct Delta {
  std::string text;
  std::vector<TokenLogprob> tokens;
};

// One request, shared by the HTTP thread that waits on it and the scheduler that runs it.
class Job {
 public:
  explicit Job(GenerationParams params) : params(std::move(params)) {}
  const GenerationParams params;

  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  // Waits up to `timeout` for deltas or the end; appends the deltas to `out`. True once finished
  // (and everything has been handed out).
  bool wait(std::chrono::milliseconds timeout, std::vector<Delta>* out);

  // Valid once wait() returned true.
  FinishReason finish_reason = FinishReason::none;
  std::string error;
  int prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
  int slot = -1;

 private:
  friend class Scheduler;
  void emit(Delta delta);
  void finish(FinishReason reason, std::string error_message = "");
  std::atomic<bool> cancelled_{false};
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Delta> pending_;
  bool finished_ = false;
};

// A slot's decode state as the recipe that built it: the tokens it holds and the lengths of its
// forward calls (CachedPrompt::calls). Replaying the calls on the same backend and thread count
// rebuilds the state bit for bit.
struct SlotRecord {
  std::vector<int32_t> tokens;
  std::vector<int> calls;
};

// The outcome of a slot action: an HTTP-like status (200, 400 bad record, 409 slot busy,
// 503 stopped) with a message, and the record of a save.
struct SlotActionResult {
  int status = 200;
  std::string error;
  SlotRecord record;
};

struct SchedulerOptions {
  int max_queue = 64;       // requests waiting for a slot; submit() refuses beyond
  int prefill_chunk = 512;  // prompt tokens prefilled per iteration, over all slots
  // The prompt cache also keeps the state after every snapshot_every tokens of a long prompt
  // (its chunks are cut there), not only at its end; 0: at prompt ends only. A backend that
  // prefills an empty slot's prompt whole (the GPU) keeps prompt ends only.
  int snapshot_every = 2048;
  PromptCache* cache = nullptr;  // the prompt-state cache, or null
  // A backend without chunked prefill (the GPU) continues a restored state one decode step per
  // token: there a cached prefix is used only when at most this many prompt tokens remain after
  // it; else the whole prompt is prefilled in one forward, which costs less.
  int stepped_rest_max = 64;
  // Threads choosing the next tokens of a decode step's sequences (each with its own sampler, so
  // the text does not depend on them); 0: OpenMP's count on the scheduler thread (the CPU
  // backend's threads, else the cores).
  int sample_threads = 0;
};

struct SlotInfo {
  int id = 0;
  bool busy = false;
  std::string phase;  // "idle", "prefill", "decode"
  long position = 0;  // tokens in the slot's state
  int prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0;
  size_t state_bytes = 0;
};

class Scheduler {
 public:
  // `backend`, `tokenizer` and `metrics` must outlive the scheduler. Starts the thread.
  Scheduler(runtime::SequenceSlots& backend, const Tokenizer& tokenizer, Metrics& metrics,
            SchedulerOptions options);
  ~Scheduler();  // drain()

  enum class Submitted { accepted, queue_full, stopping };
  Submitted submit(std::shared_ptr<Job> job);
  // Refuses new requests, runs the admitted and waiting ones to their end, stops the thread.
  void drain();

  // Slot actions (POST /slots/{id}), run by the scheduler thread between iterations on an idle
  // slot. save: the slot's record (what its last request left). erase: the slot emptied.
  // restore: the record replayed into the slot, and its state put into the prompt cache (needs
  // one), so that a request whose prompt extends the record's tokens starts from it.
  SlotActionResult slot_save(int slot);
  SlotActionResult slot_erase(int slot);
  SlotActionResult slot_restore(int slot, const SlotRecord& record);
  std::vector<SlotInfo> slots() const;
  long waiting() const;
  long running() const;
  runtime::SequenceSlots& backend() { return backend_; }

 private:
  struct Slot;
  struct SlotTask;
  SlotActionResult run_slot_action(int slot, std::function<SlotActionResult(Slot&)> action);
  void run();
  void start(Slot& slot);  // state reset or restored, phase prefill
  // Prompt tokens between the states the prompt cache keeps inside a long prompt (0: none; a
  // backend without chunked prefill takes prompts whole).
  size_t snapshot_interval() const;
  // The tokens of the slot's prompt its next prefill call takes within `budget`.
  int prefill_size(const Slot& slot, int budget) const;
  // Bookkeeping after the backend took `n` more prompt tokens of the slot (or failed).
  void prefilled(Slot& slot, int n, const Status& status);
  // The slot's state (its tokens, calls and last logits) into the prompt cache; false when the
  // backend gave no snapshot.
  bool remember(const Slot& slot);
  void on_logits(Slot& slot, const float* logits);  // choose(), then on_choice()
  // The slot's next token from its logits (V) with its logprobs when asked; touches nothing but
  // the slot's sampler, so the rows of a decode step run it in parallel.
  TokenLogprob choose(Slot& slot, const float* logits) const;
  void on_choice(Slot& slot, const TokenLogprob& choice);  // emit, maybe finish
  void finish(Slot& slot, FinishReason reason, const std::string& error = "");
  // Finishes (cancelled) and removes the waiting jobs whose clients left. Under mutex_.
  void drop_cancelled_waiting();

  runtime::SequenceSlots& backend_;
  const Tokenizer& tokenizer_;
  Metrics& metrics_;
  SchedulerOptions options_;
  std::vector<std::unique_ptr<Slot>> slots_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::deque<std::shared_ptr<SlotTask>> tasks_;  // slot actions waiting for the thread
  bool exited_ = false;                          // the thread has returned
  long active_ = 0;                              // slots holding a job (under mutex_)
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace golinear::serve
