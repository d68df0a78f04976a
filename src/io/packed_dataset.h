// Training sequences: the documents of a text file (io/text_data.h), each turned into token ids
// by the caller's `encode` (the model's tokenizer, no special tokens) and followed by EOS,
// concatenated in a seeded random document order, and cut into sequences of seq_len tokens that
// each start with BOS (seq_len − 1 text tokens). Deterministic for a seed. io packs ids; the
// tokenizer stays with the caller.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"

namespace golinear {

struct DatasetOptions {
  int seq_len = 4096;
  long max_sequences = 0;  // stop encoding once this many sequences are filled (0: all)
  uint64_t seed = 0;
};

struct PackedDataset {
  int seq_len = 0;
  std::vector<int32_t> tokens;  // (N, seq_len) row-major
  long size() const { return seq_len ? (long)(tokens.size() / seq_len) : 0; }
  const int32_t* sequence(long i) const { return tokens.data() + i * seq_len; }
};

// One document's text → its token ids.
using DocumentEncoder = std::function<std::vector<int32_t>(const std::string& text)>;

// Packs `documents` (in the seeded order) into sequences; `source` names them in errors.
Result<PackedDataset> dataset_pack(const std::vector<std::string>& documents, const DocumentEncoder& encode,
                                   int bos_id, int eos_id, const DatasetOptions& options,
                                   const std::string& source);

// The documents of the text file `path` (text_documents_read), packed as above.
Result<PackedDataset> dataset_build(const std::string& path, const DocumentEncoder& encode, int bos_id,
                                    int eos_id, const DatasetOptions& options);

// Deterministic permutation of 0..n-1 (Fisher–Yates driven by splitmix64 of the seed).
std::vector<long> seeded_permutation(long n, uint64_t seed);

}  // namespace golinear
