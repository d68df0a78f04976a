// The prompt-state cache (serve/prompt_cache.h): longest cached prefix, LRU eviction under the
// byte budget, replacement of an equal prompt.
#include "serve/prompt_cache.h"

#include <gtest/gtest.h>

namespace golinear::serve {
namespace {

class FakeSnapshot final : public runtime::StateSnapshot {
 public:
  explicit FakeSnapshot(size_t bytes) : bytes_(bytes) {}
  size_t bytes() const override { return bytes_; }
  long position() const override { return 0; }

 private:
  size_t bytes_;
};

std::shared_ptr<const CachedPrompt> entry(std::vector<int32_t> tokens, size_t state_bytes = 1000) {
  auto e = std::make_shared<CachedPrompt>();
  e->tokens = std::move(tokens);
  e->state = std::make_shared<FakeSnapshot>(state_bytes);
  e->last_logits.assign(4, 0.0f);
  return e;
}

TEST(PromptCache, LongestCachedPrefixOfThePrompt) {
  PromptCache cache(1 << 20);
  cache.insert(entry({1, 2}));
  cache.insert(entry({1, 2, 3, 4}));
  cache.insert(entry({1, 2, 3, 4, 5, 6, 7}));  // longer than the prompt below
  cache.insert(entry({9, 9, 9}));
  auto hit = cache.lookup({1, 2, 3, 4, 5, 6});
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->tokens, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(cache.lookup({1, 2})->tokens.size(), 2u);  // a prompt equal to an entry
  EXPECT_FALSE(cache.lookup({2, 1, 3}));
  EXPECT_FALSE(cache.lookup({1}));
  const auto stats = cache.stats();
  EXPECT_EQ(stats.hits, 2u);
  EXPECT_EQ(stats.misses, 2u);
  EXPECT_EQ(stats.entries, 4u);
  // At least min_tokens: a prefix shorter than that is a miss.
  EXPECT_FALSE(cache.lookup({1, 2, 3, 4, 5, 6}, 5));
  EXPECT_EQ(cache.lookup({1, 2, 3, 4, 5, 6}, 4)->tokens.size(), 4u);
  EXPECT_EQ(cache.stats().misses, 3u);
}

TEST(PromptCache, EvictsLeastRecentlyUsedWithinTheBudget) {
  const size_t one = entry({1, 2, 3})->bytes();
  PromptCache cache(3 * one);
  cache.insert(entry({1, 2, 3}));
  cache.insert(entry({4, 5, 6}));
  cache.insert(entry({7, 8, 9}));
  ASSERT_TRUE(cache.lookup({1, 2, 3, 0}));  // {1,2,3} is now the most recent
  cache.insert(entry({6, 6, 6}));           // evicts {4,5,6}
  EXPECT_TRUE(cache.lookup({1, 2, 3}));
  EXPECT_FALSE(cache.lookup({4, 5, 6}));
  EXPECT_TRUE(cache.lookup({7, 8, 9}));
  EXPECT_TRUE(cache.lookup({6, 6, 6}));
  auto stats = cache.stats();
  EXPECT_EQ(stats.evictions, 1u);
  EXPECT_LE(stats.bytes, stats.capacity_bytes);
  // Too large for the whole budget: not kept, nothing evicted.
  cache.insert(entry({5, 5}, 10 * one));
  EXPECT_FALSE(cache.lookup({5, 5}));
  EXPECT_EQ(cache.stats().entries, 3u);
  // The same prompt again replaces the entry.
  cache.insert(entry({7, 8, 9}, 10));
  EXPECT_EQ(cache.stats().entries, 3u);
}

}  // namespace
}  // namespace golinear::serve
