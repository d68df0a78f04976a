// What the GPU trainer tests (attention transfer, distillation) share: random packed sequences,
// default-recipe students and their flattened parameters.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "model/linearization.h"
#include "train/attention_transfer.h"
#include "io/packed_dataset.h"

namespace golinear::train::cuda::test {

// n sequences of T tokens, BOS (0) first, the rest from a fixed LCG below V.
inline PackedDataset random_sequences(int n, int T, int V) {
  PackedDataset data;
  data.seq_len = T;
  uint64_t state = 12345;
  for (int i = 0; i < n * T; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    data.tokens.push_back(i % T == 0 ? 0 : (int32_t)((state >> 33) % V));
  }
  return data;
}

// The default recipe with a short window (sinks 4, window 28), so that short sequences run the
// GDN.
inline mixers::MixerOptions short_window_recipe() {
  mixers::MixerOptions options;
  options.sinks = 4;
  options.window = 28;
  return options;
}

// Students of `options` (default: short_window_recipe), seed 7.
inline MixerStack students_of(const Model& model, const std::vector<int>& keep_full = {},
                              const mixers::MixerOptions& options = short_window_recipe()) {
  auto s = linearized_mixers(model, options, keep_full, 7);
  EXPECT_TRUE(s.ok()) << s.error();
  return std::move(*s);
}

inline std::vector<float> flatten(MixerStack& stack) {
  std::vector<float> all;
  for (auto* p : trainable_parameters(stack)) all.insert(all.end(), p->value.begin(), p->value.end());
  return all;
}

}  // namespace golinear::train::cuda::test
