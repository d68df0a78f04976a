#include "serve/scheduler.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/transformer.h"

namespace golinear::serve {

const char* to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::none:
      return "none";
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
      return "length";
    case FinishReason::cancelled:
      return "cancelled";
    case FinishReason::error:
      return "error";
  }
  return "none";
}

bool Job::wait(std::chrono::milliseconds timeout, std::vector<Delta>* out) {
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait_for(lock, timeout, [&] { return finished_ || !pending_.empty(); });
  while (!pending_.empty()) {
    out->push_back(std::move(pending_.front()));
    pending_.pop_front();
  }
  return finished_;
}

void Job::emit(Delta delta) {
  if (delta.text.empty() && delta.tokens.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back(std::move(delta));
  }
  ready_.notify_all();
}

void Job::finish(FinishReason reason, std::string error_message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finish_reason = reason;
    error = std::move(error_message);
    finished_ = true;
  }
  ready_.notify_all();
}

enum class Phase { idle, prefill, decode };

struct Scheduler::Slot {
  int id = 0;
  std::shared_ptr<Job> job;
  Phase phase = Phase::idle;
  std::vector<int32_t> tokens;  // what the state holds
  std::vector<int> calls;       // its forward calls (CachedPrompt::calls)
  size_t prefilled = 0;         // prompt tokens in the state
  int32_t pending = 0;          // the last chosen token, not yet in the state
  std::optional<runtime::Sampler> sampler;
  std::optional<TextOutput> text;
  std::vector<float> logits;  // (V)
  SlotInfo info;              // what slots() reports, updated under the scheduler's mutex
};

struct Scheduler::SlotTask {
  int slot = 0;
  std::function<SlotActionResult(Slot&)> action;
  std::promise<SlotActionResult> done;
};

namespace {

SlotActionResult action_error(int status, std::string message) {
  SlotActionResult out;
  out.status = status;
  out.error = std::move(message);
  return out;
}

SlotActionResult action_done(SlotRecord record) {
  SlotActionResult out;
  out.record = std::move(record);
  return out;
}

}  // namespace

Scheduler::Scheduler(runtime::SequenceSlots& backend, const Tokenizer& tokenizer, Metrics& metrics,
                     SchedulerOptions options)
    : backend_(backend), tokenizer_(tokenizer), metrics_(metrics), options_(options) {
  for (int i = 0; i < backend.slots(); ++i) {
    auto slot = std::make_unique<Slot>();
    slot->id = slot->info.id = i;
    slot->info.phase = "idle";
    slot->logits.resize(backend.vocab_size());
    slots_.push_back(std::move(slot));
  }
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() { drain(); }

void Scheduler::drop_cancelled_waiting() {
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (!(*it)->cancelled()) {
      ++it;
      continue;
    }
    metrics_.count_finished(to_string(FinishReason::cancelled));
    (*it)->finish(FinishReason::cancelled);
    it = queue_.erase(it);
  }
}

Scheduler::Submitted Scheduler::submit(std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return Submitted::stopping;
    drop_cancelled_waiting();  // a request whose client left holds no place in the queue
    const long free_slots = (long)slots_.size() - active_;
    if ((long)queue_.size() - free_slots >= options_.max_queue) {
      ++metrics_.requests_rejected_queue_full;
      return Submitted::queue_full;
    }
    queue_.push_back(std::move(job));
  }
  wake_.notify_all();
  return Submitted::accepted;
}

void Scheduler::drain() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::vector<SlotInfo> Scheduler::slots() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<SlotInfo> out;
  for (const auto& slot : slots_) out.push_back(slot->info);
  return out;
}

long Scheduler::waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return (long)queue_.size();
}

long Scheduler::running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return active_;
}

void Scheduler::run() {
  std::vector<int> batch;
  std::vector<int32_t> batch_ids;
  std::vector<float> batch_logits;
  std::vector<int32_t> batch_next;    // (B) the greedy step's choices
  std::vector<TokenLogprob> choices;  // (B)
  const size_t V = backend_.vocab_size();
  for (;;) {
    std::vector<Slot*> admitted;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // A cancelled request that waits gives up its place without running.
      for (auto it = queue_.begin(); it != queue_.end();)
        if ((*it)->cancelled()) {
          (*it)->finish(FinishReason::cancelled);
          metrics_.count_finished("cancelled");
          it = queue_.erase(it);
        } else {
          ++it;
        }
      wake_.wait(lock,
                 [&] { return stopping_ || !queue_.empty() || active_ > 0 || !tasks_.empty(); });
      std::deque<std::shared_ptr<SlotTask>> tasks;
      tasks.swap(tasks_);
      if (stopping_ && queue_.empty() && active_ == 0 && tasks.empty()) {
        exited_ = true;
        return;
      }
      lock.unlock();
      for (auto& task : tasks) {
        Slot& slot = *slots_[task->slot];
        task->done.set_value(slot.job ? action_error(409, str_cat("slot ", slot.id, " is busy"))
                                      : task->action(slot));
      }
      lock.lock();
      drop_cancelled_waiting();
      for (auto& slot : slots_) {
        if (queue_.empty()) break;
        if (slot->job) continue;
        slot->job = std::move(queue_.front());
        queue_.pop_front();
        ++active_;
        admitted.push_back(slot.get());
      }
    }
    for (Slot* slot : admitted) start(*slot);
    for (auto& slot : slots_)
      if (slot->job && slot->job->cancelled()) finish(*slot, FinishReason::cancelled);

    // Prompts: at most prefill_chunk tokens this iteration, in slot order, in one backend call.
    int used = 0;
    std::vector<Slot*> prefilling;
    std::vector<runtime::PrefillChunk> chunks;
    for (auto& slot : slots_)
      if (slot->job && slot->phase == Phase::prefill && used < options_.prefill_chunk) {
        const int n = prefill_size(*slot, options_.prefill_chunk - used);
        chunks.push_back({slot->id, slot->job->params.prompt.data() + slot->prefilled, n,
                          slot->logits.data()});
        prefilling.push_back(slot.get());
        used += n;
      }
    if (!chunks.empty()) {
      const std::vector<Status> statuses = backend_.prefill_batch(chunks);
      for (size_t i = 0; i < chunks.size(); ++i)
        prefilled(*prefilling[i], chunks[i].T, statuses[i]);
    }

    // One decode step over every generating sequence.
    batch.clear();
    batch_ids.clear();
    for (auto& slot : slots_)
      if (slot->job && slot->phase == Phase::decode) {
        batch.push_back(slot->id);
        batch_ids.push_back(slot->pending);
      }
    if (!batch.empty()) {
      const long B = (long)batch.size();
      choices.resize(B);
      // Every sequence greedy without logprobs: only the argmax of each row comes back.
      bool greedy = true;
      for (int id : batch) {
        const GenerationParams& params = slots_[id]->job->params;
        greedy = greedy && params.sampler.greedy() && params.top_logprobs < 0;
      }
      Status status = ok_status();
      if (greedy) {
        batch_next.resize(B);
        status = backend_.decode_greedy(batch.data(), batch_ids.data(), (int)B, batch_next.data());
        for (long b = 0; b < B; ++b) {
          choices[b] = TokenLogprob{};
          choices[b].id = batch_next[b];
        }
      } else {
        batch_logits.resize(batch.size() * V);
        status = backend_.decode(batch.data(), batch_ids.data(), (int)B, batch_logits.data());
      }
      ++metrics_.decode_steps;
      metrics_.decode_step_sequences += batch.size();
      // The choices in parallel (each slot's own sampler), then the bookkeeping in slot order.
      if (status.ok() && !greedy) {
        const int threads =
            options_.sample_threads > 0 ? options_.sample_threads : omp_get_max_threads();
#pragma omp parallel for schedule(dynamic) num_threads(threads) if (B > 1)
        for (long b = 0; b < B; ++b)
          choices[b] = choose(*slots_[batch[b]], batch_logits.data() + b * V);
      }
      for (long b = 0; b < B; ++b) {
        Slot& slot = *slots_[batch[b]];
        if (!status.ok()) {
          finish(slot, FinishReason::error, status.error());
          continue;
        }
        slot.tokens.push_back(slot.pending);
        slot.calls.push_back(0);
        on_choice(slot, choices[b]);
      }
    }

    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& slot : slots_) {
      SlotInfo& info = slot->info;
      info.busy = slot->job != nullptr;
      info.phase = !slot->job ? "idle" : slot->phase == Phase::prefill ? "prefill" : "decode";
      info.position = (long)slot->tokens.size();
      if (slot->job) {
        info.prompt_tokens = slot->job->prompt_tokens;
        info.cached_tokens = slot->job->cached_tokens;
        info.generated_tokens = slot->job->completion_tokens;
      }
      info.state_bytes = backend_.slot_bytes(slot->id);
    }
  }
}

void Scheduler::start(Slot& slot) {
  Job& job = *slot.job;
  job.slot = slot.id;
  job.prompt_tokens = (int)job.params.prompt.size();
  slot.sampler.emplace(job.params.sampler);
  slot.text.emplace(tokenizer_, job.params.stop);
  slot.tokens.clear();
  slot.calls.clear();
  slot.prefilled = 0;
  slot.phase = Phase::prefill;
  metrics_.prompt_tokens += job.params.prompt.size();

  std::shared_ptr<const CachedPrompt> hit;
  if (options_.cache && backend_.can_snapshot()) {
    // A backend that continues a state token by token takes only a prefix with a short rest.
    const size_t rest_max = (size_t)std::max(0, options_.stepped_rest_max);
    const size_t min_tokens = backend_.chunked_prefill() || job.params.prompt.size() <= rest_max
                                  ? 0
                                  : job.params.prompt.size() - rest_max;
    hit = options_.cache->lookup(job.params.prompt, min_tokens);
  }
  Status status = hit ? backend_.restore(slot.id, *hit->state) : backend_.reset(slot.id);
  if (!status.ok() && hit) {  // fall back to an empty state
    hit = nullptr;
    status = backend_.reset(slot.id);
  }
  if (!status.ok()) return finish(slot, FinishReason::error, status.error());
  if (!hit) return;
  slot.tokens = hit->tokens;
  slot.calls = hit->calls;
  slot.prefilled = hit->tokens.size();
  job.cached_tokens = (int)hit->tokens.size();
  metrics_.prompt_tokens_cached += hit->tokens.size();
  if (slot.prefilled == job.params.prompt.size()) on_logits(slot, hit->last_logits.data());
}

size_t Scheduler::snapshot_interval() const {
  return options_.snapshot_every > 0 && backend_.chunked_prefill() ? options_.snapshot_every : 0;
}

int Scheduler::prefill_size(const Slot& slot, int budget) const {
  const auto& prompt = slot.job->params.prompt;
  // A backend that appends to a state token by token gets an empty slot's prompt whole.
  if (!backend_.chunked_prefill() && slot.prefilled == 0) budget = (int)prompt.size();
  int n = (int)std::min<size_t>(budget, prompt.size() - slot.prefilled);
  // Chunks end at every snapshot_every tokens of a long prompt, where its state is kept.
  const size_t every = snapshot_interval();
  if (every > 0) {
    const size_t next = (slot.prefilled / every + 1) * every;
    if (next < prompt.size()) n = (int)std::min<size_t>(n, next - slot.prefilled);
  }
  return n;
}

void Scheduler::prefilled(Slot& slot, int n, const Status& status) {
  if (!status.ok()) return finish(slot, FinishReason::error, status.error());
  const auto& prompt = slot.job->params.prompt;
  slot.tokens.insert(slot.tokens.end(), prompt.begin() + slot.prefilled,
                     prompt.begin() + slot.prefilled + n);
  slot.prefilled += n;
  slot.calls.push_back(n);
  metrics_.prompt_tokens_prefilled += n;
  const bool done = slot.prefilled == prompt.size();
  const size_t every = snapshot_interval();
  if (options_.cache && backend_.can_snapshot() &&
      (done || (every > 0 && slot.prefilled % every == 0)))
    remember(slot);
  if (done) on_logits(slot, slot.logits.data());
}

bool Scheduler::remember(const Slot& slot) {
  auto entry = std::make_shared<CachedPrompt>();
  entry->tokens = slot.tokens;
  entry->state = backend_.snapshot(slot.id);
  entry->last_logits = slot.logits;
  entry->calls = slot.calls;
  if (!entry->state) return false;
  options_.cache->insert(std::move(entry));
  return true;
}

namespace {

// log softmax(logits)[id] of the chosen token and of the n most likely: log_softmax_at
// (model/transformer.h)'s arithmetic, its max and sum computed once for all of them.
TokenLogprob logprobs_of(const float* logits, int V, int32_t id, int n) {
  const float m = *std::max_element(logits, logits + V);
  double sum = 0.0;
  for (int i = 0; i < V; ++i) sum += std::exp((double)logits[i] - m);
  const double log_sum = std::log(sum);
  auto log_softmax = [&](int32_t i) { return (float)(logits[i] - m - log_sum); };
  TokenLogprob out;
  out.id = id;
  out.logprob = log_softmax(id);
  n = std::min(n, V);
  if (n > 0) {
    std::vector<int32_t> order(V);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    for (int i = 0; i < n; ++i) out.top.emplace_back(order[i], log_softmax(order[i]));
  }
  return out;
}

}  // namespace

void Scheduler::on_logits(Slot& slot, const float* logits) {
  on_choice(slot, choose(slot, logits));
}

TokenLogprob Scheduler::choose(Slot& slot, const float* logits) const {
  const int V = backend_.vocab_size();
  const int32_t id = slot.sampler->sample(logits, V);
  const int top_logprobs = slot.job->params.top_logprobs;
  if (top_logprobs >= 0) return logprobs_of(logits, V, id, top_logprobs);
  TokenLogprob choice;
  choice.id = id;
  return choice;
}

void Scheduler::on_choice(Slot& slot, const TokenLogprob& choice) {
  Job& job = *slot.job;
  const int32_t id = choice.id;
  ++job.completion_tokens;
  ++metrics_.generation_tokens;
  Delta delta;
  if (job.params.top_logprobs >= 0) delta.tokens.push_back(choice);
  const auto& stop_ids = job.params.stop_ids;
  if (std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end()) {
    delta.text = slot.text->finish();
    job.emit(std::move(delta));
    return finish(slot, FinishReason::stop);
  }
  delta.text = slot.text->push(id);
  if (slot.text->stopped()) {
    job.emit(std::move(delta));
    return finish(slot, FinishReason::stop);
  }
  if (job.completion_tokens >= job.params.max_tokens) {
    delta.text += slot.text->finish();
    job.emit(std::move(delta));
    return finish(slot, FinishReason::length);
  }
  job.emit(std::move(delta));
  slot.pending = id;
  slot.phase = Phase::decode;
}

void Scheduler::finish(Slot& slot, FinishReason reason, const std::string& error) {
  metrics_.count_finished(to_string(reason));
  slot.job->finish(reason, error);
  slot.job = nullptr;
  slot.phase = Phase::idle;
  if (reason == FinishReason::error) {
    (void)backend_.reset(slot.id);
    slot.tokens.clear();
    slot.calls.clear();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  --active_;
}

}  // namespace golinear::serve

namespace golinear::serve {

SlotActionResult Scheduler::run_slot_action(int slot,
                                            std::function<SlotActionResult(Slot&)> action) {
  if (slot < 0 || slot >= (int)slots_.size())
    return action_error(400, str_cat("slot ", slot, " does not exist (", slots_.size(), " slots)"));
  auto task = std::make_shared<SlotTask>();
  task->slot = slot;
  task->action = std::move(action);
  std::future<SlotActionResult> done = task->done.get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (exited_) return action_error(503, "the server is shutting down");
    tasks_.push_back(task);
  }
  wake_.notify_all();
  return done.get();
}

SlotActionResult Scheduler::slot_save(int slot) {
  return run_slot_action(slot, [](Slot& s) -> SlotActionResult {
    if (s.tokens.empty()) return action_error(400, str_cat("slot ", s.id, " holds no tokens"));
    return action_done({s.tokens, s.calls});
  });
}

SlotActionResult Scheduler::slot_erase(int slot) {
  return run_slot_action(slot, [this](Slot& s) -> SlotActionResult {
    SlotActionResult out = action_done({s.tokens, s.calls});
    Status status = backend_.reset(s.id);
    s.tokens.clear();
    s.calls.clear();
    if (!status.ok()) return action_error(500, status.error());
    return out;
  });
}

SlotActionResult Scheduler::slot_restore(int slot, const SlotRecord& record) {
  if (!options_.cache || !backend_.can_snapshot())
    return action_error(400,
                        "restoring a slot needs the prompt cache (--cache-ram > 0, a backend with "
                        "snapshots)");
  long covered = 0;
  for (int n : record.calls) {
    if (n < 0) return action_error(400, "the slot file's calls must be ≥ 0");
    covered += n == 0 ? 1 : n;
  }
  if (record.tokens.empty() || covered != (long)record.tokens.size())
    return action_error(400, str_cat("the slot file's calls cover ", covered, " tokens, it holds ",
                                     record.tokens.size()));
  for (int32_t id : record.tokens)
    if (id < 0 || id >= backend_.vocab_size())
      return action_error(400,
                          str_cat("the slot file holds token id ", id, ", outside the vocabulary"));
  return run_slot_action(slot, [this, &record](Slot& s) -> SlotActionResult {
    s.tokens.clear();
    s.calls.clear();
    Status status = backend_.reset(s.id);
    size_t at = 0;
    for (size_t i = 0; status.ok() && i < record.calls.size(); ++i) {
      const int n = record.calls[i];
      const int32_t* ids = record.tokens.data() + at;
      status = n > 0 ? backend_.prefill(s.id, ids, n, s.logits.data())
                     : backend_.decode(&s.id, ids, 1, s.logits.data());
      at += n > 0 ? n : 1;
    }
    if (!status.ok()) {
      (void)backend_.reset(s.id);
      return action_error(500, status.error());
    }
    s.tokens = record.tokens;
    s.calls = record.calls;
    if (!remember(s)) return action_error(500, "the backend could not snapshot the restored state");
    return action_done(record);
  });
}

}  // namespace golinear::serve
