// The prompt-state cache: decode states snapshotted at prompt boundaries
// (runtime/sequence_slots.h's runtime::StateSnapshot, with the logits of the prompt's last token),
// kept in host memory under a byte budget, least recently used first out. A request whose prompt
// starts with a cached prompt restores that state and prefills only the rest; a prompt equal to a
// cached one prefills nothing. The state of a linearized model is constant-size, so an entry costs
// the same at any length; a softmax layer's KV cache is copied with it and counted by its bytes.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/sequence_slots.h"

namespace golinear::serve {

struct CachedPrompt {
  std::vector<int32_t> tokens;                          // the prompt the state holds
  std::shared_ptr<const runtime::StateSnapshot> state;  // after all of `tokens`
  std::vector<float> last_logits;                       // (V) of tokens.back()
  // How the state was built: the lengths of its forward calls in order (n > 0: a prefill of n
  // tokens, 0: a one-token decode step), so that replaying them rebuilds it bit for bit.
  std::vector<int> calls;
  size_t bytes() const {
    return state->bytes() + tokens.size() * sizeof(int32_t) + last_logits.size() * sizeof(float);
  }
};

struct PromptCacheStats {
  size_t entries = 0, bytes = 0, capacity_bytes = 0;
  uint64_t hits = 0, misses = 0, evictions = 0;
};

class PromptCache {
 public:
  explicit PromptCache(size_t capacity_bytes) : capacity_(capacity_bytes) {}
  // The longest entry whose tokens are a prefix of `prompt` (at most all of it) and number at
  // least `min_tokens`, or null; counts a hit or a miss and makes the entry the most recently
  // used.
  std::shared_ptr<const CachedPrompt> lookup(const std::vector<int32_t>& prompt,
                                             size_t min_tokens = 0);
  // Adds `entry` (replacing one with the same tokens), evicting the least recently used until it
  // fits; an entry larger than the whole budget is not kept.
  void insert(std::shared_ptr<const CachedPrompt> entry);
  PromptCacheStats stats() const;

 private:
  size_t capacity_;
  mutable std::mutex mutex_;
  std::list<std::shared_ptr<const CachedPrompt>> entries_;  // most recently used first
  size_t bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

}  // namespace golinear::serve
