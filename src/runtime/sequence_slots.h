// What the scheduler (serve/scheduler.h) runs the model through: a fixed set of slots, each
// holding one sequence's decode state, a prefill that appends a prompt chunk to one slot, and a
// decode step that advances B slots by one token each. The CPU slots (runtime/cpu_sequence_slots.h)
// are the reference; the GPU slots (runtime/cuda/sequence_slots.h) implement the same interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <vector>

#include "common/result.h"
#include "runtime/sampler.h"

namespace golinear::runtime {

// A copy of one slot's decode state, restorable into any slot of the same backend.
class StateSnapshot {
 public:
  virtual ~StateSnapshot() = default;
  virtual size_t bytes() const = 0;
  virtual long position() const = 0;  // tokens the state holds
};

// The tokens the callers that pack work into one forward give it at most (batched generation's
// prefill_batch calls, eval's scoring passes): on the GPU a packed forward holds the activations
// of all its tokens at once.
inline constexpr long kPackedForwardTokens = 16384;

// One slot's prompt chunk of a prefill_batch call.
struct PrefillChunk {
  int slot = 0;
  const int32_t* ids = nullptr;
  int T = 0;
  float* last_logits = nullptr;  // (V)
};

class SequenceSlots {
 public:
  virtual ~SequenceSlots() = default;
  virtual int slots() const = 0;
  virtual int vocab_size() const = 0;
  // "cpu" or "cuda", and whether decode() runs the B sequences as one batched kernel call or
  // one after the other (reported on /slots and /metrics).
  virtual const char* device() const = 0;
  virtual bool batched_kernels() const = 0;

  // The slot back to an empty sequence: nothing of what it held before can reach the next one.
  virtual Status reset(int slot) = 0;
  // Whether a prompt chunk appended to a non-empty state costs what it costs in an empty one
  // (the CPU). When not (the GPU appends to a state token by token, but prefills an empty one in
  // one forward), the scheduler gives an empty slot its whole prompt in one call.
  virtual bool chunked_prefill() const { return true; }
  // Appends T ≥ 1 tokens ids (T) to the slot's sequence; last_logits (V) of the last one.
  virtual Status prefill(int slot, const int32_t* ids, int T, float* last_logits) = 0;
  // Several slots' chunks (distinct slots) as prefill() would take them one after the other;
  // each chunk's own status. A backend whose forward packs prompts (the GPU: the empty slots'
  // prompts in one forward) takes them together.
  virtual std::vector<Status> prefill_batch(const std::vector<PrefillChunk>& chunks) {
    std::vector<Status> out;
    for (const PrefillChunk& c : chunks) out.push_back(prefill(c.slot, c.ids, c.T, c.last_logits));
    return out;
  }
  // One token per slot: slots (B) distinct, ids (B); logits (B, V).
  virtual Status decode(const int* slots, const int32_t* ids, int B, float* logits) = 0;
  // The same step when only the greedy choice is wanted: next (B) the argmax of each row (first
  // index on ties), without the logits on the host (a GPU copies B ints, not B·V floats).
  virtual Status decode_greedy(const int* slots, const int32_t* ids, int B, int32_t* next) {
    const size_t V = vocab_size();
    std::vector<float> logits((size_t)B * V);
    GL_TRY(decode(slots, ids, B, logits.data()));
    for (int b = 0; b < B; ++b) next[b] = argmax(logits.data() + b * V, (int)V);
    return ok_status();
  }
  // Memory the slot's state holds now.
  virtual size_t slot_bytes(int slot) const = 0;

  // Snapshots (the prompt cache, slot save/restore); a backend without them returns null /
  // an error, and the server then serves without a prompt cache.
  virtual bool can_snapshot() const { return false; }
  virtual std::shared_ptr<const StateSnapshot> snapshot(int slot) const { return nullptr; }
  virtual Status restore(int slot, const StateSnapshot& snapshot) {
    return make_error("this backend cannot restore a sequence state");
  }
};

}  // namespace golinear::runtime
