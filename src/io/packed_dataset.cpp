#include "io/packed_dataset.h"

#include "io/text_data.h"

namespace golinear {

std::vector<long> seeded_permutation(long n, uint64_t seed) {
  std::vector<long> order(n);
  for (long i = 0; i < n; ++i) order[i] = i;
  uint64_t state = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
  auto next = [&state]() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  for (long i = n - 1; i > 0; --i) std::swap(order[i], order[next() % (uint64_t)(i + 1)]);
  return order;
}

Result<PackedDataset> dataset_pack(const std::vector<std::string>& documents, const DocumentEncoder& encode,
                                   int bos_id, int eos_id, const DatasetOptions& options,
                                   const std::string& source) {
  if (options.seq_len < 2) return make_error("dataset: seq_len must be at least 2");
  if (bos_id < 0 || eos_id < 0)
    return make_error("dataset: the model defines no BOS or EOS token to pack sequences with");
  PackedDataset data;
  data.seq_len = options.seq_len;
  const long body = options.seq_len - 1;
  std::vector<int32_t> stream;
  for (long index : seeded_permutation((long)documents.size(), options.seed)) {
    std::vector<int32_t> ids = encode(documents[index]);
    stream.insert(stream.end(), ids.begin(), ids.end());
    stream.push_back(eos_id);
    while ((long)stream.size() >= body) {
      data.tokens.push_back(bos_id);
      data.tokens.insert(data.tokens.end(), stream.begin(), stream.begin() + body);
      stream.erase(stream.begin(), stream.begin() + body);
      if (options.max_sequences > 0 && data.size() >= options.max_sequences) return data;
    }
  }
  if (data.size() == 0)
    return make_error(source, ": too little text for one sequence of ", options.seq_len, " tokens");
  return data;
}

Result<PackedDataset> dataset_build(const std::string& path, const DocumentEncoder& encode, int bos_id,
                                    int eos_id, const DatasetOptions& options) {
  GL_ASSIGN_OR_RETURN(std::vector<std::string> documents, text_documents_read(path));
  return dataset_pack(documents, encode, bos_id, eos_id, options, path);
}

}  // namespace golinear
