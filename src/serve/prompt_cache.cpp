#include "serve/prompt_cache.h"

#include <algorithm>

namespace golinear::serve {

std::shared_ptr<const CachedPrompt> PromptCache::lookup(const std::vector<int32_t>& prompt,
                                                       size_t min_tokens) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto best = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const auto& tokens = (*it)->tokens;
    if (tokens.size() > prompt.size() || tokens.empty() || tokens.size() < min_tokens) continue;
    if (best != entries_.end() && tokens.size() <= (*best)->tokens.size()) continue;
    if (std::equal(tokens.begin(), tokens.end(), prompt.begin())) best = it;
  }
  if (best == entries_.end()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  entries_.splice(entries_.begin(), entries_, best);
  return entries_.front();
}

void PromptCache::insert(std::shared_ptr<const CachedPrompt> entry) {
  const size_t size = entry->bytes();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if ((*it)->tokens == entry->tokens) {
      bytes_ -= (*it)->bytes();
      entries_.erase(it);
      break;
    }
  if (size > capacity_) return;
  while (bytes_ + size > capacity_ && !entries_.empty()) {
    bytes_ -= entries_.back()->bytes();
    entries_.pop_back();
    ++evictions_;
  }
  entries_.push_front(std::move(entry));
  bytes_ += size;
}

PromptCacheStats PromptCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {entries_.size(), bytes_, capacity_, hits_, misses_, evictions_};
}

}  // namespace golinear::serve
