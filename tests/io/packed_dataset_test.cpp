// The data packer: documents → ids (the caller's encoder) + EOS, in a seeded order, cut into
// sequences of seq_len that start with BOS.
#include <gtest/gtest.h>

#include <algorithm>

#include "io/packed_dataset.h"

namespace golinear {
namespace {

// "abc" → {'a', 'b', 'c'}: one id per character.
std::vector<int32_t> encode_chars(const std::string& text) {
  return std::vector<int32_t>(text.begin(), text.end());
}

TEST(SeededPermutation, IsAPermutationAndDependsOnTheSeed) {
  std::vector<long> a = seeded_permutation(50, 1), b = seeded_permutation(50, 1), c = seeded_permutation(50, 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::sort(c.begin(), c.end());
  for (long i = 0; i < 50; ++i) EXPECT_EQ(c[i], i);
}

TEST(DatasetPack, SequencesStartWithBosAndKeepEveryTokenInOrder) {
  const std::vector<std::string> docs = {"abcde", "fgh", "ijklmnop"};
  DatasetOptions options;
  options.seq_len = 4;
  options.seed = 7;
  auto data = dataset_pack(docs, encode_chars, /*bos=*/1, /*eos=*/2, options, "docs");
  ASSERT_TRUE(data.ok()) << data.error();
  EXPECT_EQ(data->seq_len, 4);
  // 16 characters + 3 EOS = 19 tokens → 6 full bodies of 3 (the last token is dropped).
  ASSERT_EQ(data->size(), 6);
  std::vector<int32_t> expected;
  for (long index : seeded_permutation(3, 7)) {
    for (char ch : docs[index]) expected.push_back(ch);
    expected.push_back(2);
  }
  std::vector<int32_t> bodies;
  for (long i = 0; i < data->size(); ++i) {
    EXPECT_EQ(data->sequence(i)[0], 1);
    bodies.insert(bodies.end(), data->sequence(i) + 1, data->sequence(i) + 4);
  }
  expected.resize(bodies.size());
  EXPECT_EQ(bodies, expected);
}

TEST(DatasetPack, StopsAtMaxSequencesAndEncodesNoMore) {
  std::vector<std::string> docs(100, "abcdefgh");
  int encoded = 0;
  DatasetOptions options;
  options.seq_len = 5;
  options.max_sequences = 3;
  auto data = dataset_pack(
      docs, [&](const std::string& text) { ++encoded; return encode_chars(text); }, 1, 2, options, "docs");
  ASSERT_TRUE(data.ok()) << data.error();
  EXPECT_EQ(data->size(), 3);
  EXPECT_LE(encoded, 2);  // 9 tokens a document, 4 a sequence: two documents fill three
}

TEST(DatasetPack, ClearErrors) {
  DatasetOptions options;
  options.seq_len = 64;
  auto short_text = dataset_pack({"abc"}, encode_chars, 1, 2, options, "tiny.jsonl");
  ASSERT_FALSE(short_text.ok());
  EXPECT_EQ(short_text.error(), "tiny.jsonl: too little text for one sequence of 64 tokens");
  auto no_bos = dataset_pack({"abc"}, encode_chars, -1, 2, options, "tiny.jsonl");
  ASSERT_FALSE(no_bos.ok());
  EXPECT_NE(no_bos.error().find("no BOS or EOS"), std::string::npos);
}

}  // namespace
}  // namespace golinear
