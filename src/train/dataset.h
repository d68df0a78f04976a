// Training sequences: documents tokenized with the model's tokenizer (no special tokens), each
// followed by EOS, concatenated in a seeded random document order, and cut into sequences of
// seq_len tokens that each start with BOS (seq_len − 1 text tokens). Deterministic for a seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "tokenizer/tokenizer.h"

namespace golinear::train {

struct DatasetOptions {
  int seq_len = 4096;
  long max_sequences = 0;  // stop tokenizing once this many sequences are filled (0: all)
  uint64_t seed = 0;
};

struct PackedDataset {
  int seq_len = 0;
  std::vector<int32_t> tokens;  // (N, seq_len) row-major
  long size() const { return seq_len ? (long)(tokens.size() / seq_len) : 0; }
  const int32_t* sequence(long i) const { return tokens.data() + i * seq_len; }
};

Result<PackedDataset> dataset_build(const std::string& path, const Tokenizer& tokenizer,
                                    int bos_id, int eos_id, const DatasetOptions& options);

// Deterministic permutation of 0..n-1 (Fisher–Yates driven by splitmix64 of the seed).
std::vector<long> seeded_permutation(long n, uint64_t seed);

}  // namespace golinear::train
