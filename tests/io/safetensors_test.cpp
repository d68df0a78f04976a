// The safetensors reader against files that break each promise of the format: every bad file
// must give an Error naming the file and what is wrong, never a crash.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/checkpoint.h"
#include "io/safetensors.h"

namespace golinear {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("golinear_io_test_" + std::to_string(::getpid()) + "_" +
                                         std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
  static inline int counter_ = 0;
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A safetensors file from a header text and a data section.
std::string make_file(const std::string& header, const std::string& data, uint64_t size_override = 0) {
  uint64_t size = size_override ? size_override : header.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = (char)((size >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string open_error(const std::string& path) {
  auto file = SafetensorsFile::open(path);
  EXPECT_FALSE(file.ok());
  return file.ok() ? "" : file.error();
}

TEST(Safetensors, RoundTripsWhatItWrites) {
  TempDir dir;
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {-1.5f};
  ASSERT_TRUE(safetensors_write(dir.file("x.safetensors"),
                                {{"a", {2, 3}, a.data()}, {"b", {1}, b.data()}}, {{"k", "v"}}).ok());
  auto file = SafetensorsFile::open(dir.file("x.safetensors"));
  ASSERT_TRUE(file.ok()) << file.error();
  const TensorView* ta = (*file)->find("a");
  ASSERT_NE(ta, nullptr);
  EXPECT_EQ(ta->shape, (std::vector<int64_t>{2, 3}));
  std::vector<float> back(6);
  ASSERT_TRUE(tensor_to_f32(*ta, back.data(), "x").ok());
  EXPECT_EQ(back, a);
  EXPECT_EQ((*file)->metadata().at("k"), "v");
  EXPECT_FALSE(fs::exists(dir.file("x.safetensors.tmp." + std::to_string(::getpid()))));
}

TEST(Safetensors, ConvertsBf16AndF16) {
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7C00)));
}

TEST(Safetensors, RejectsFileShorterThanHeaderSize) {
  TempDir dir;
  write_bytes(dir.file("t.safetensors"), "abc");
  EXPECT_NE(open_error(dir.file("t.safetensors")).find("shorter than 8 bytes"), std::string::npos);
}

TEST(Safetensors, RejectsTruncatedHeader) {
  TempDir dir;
  const std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  std::string bytes = make_file(header, "abcd");
  write_bytes(dir.file("t.safetensors"), bytes.substr(0, 20));
  std::string error = open_error(dir.file("t.safetensors"));
  EXPECT_NE(error.find("runs past the end of the file"), std::string::npos) << error;
  EXPECT_NE(error.find("t.safetensors"), std::string::npos) << error;
}

TEST(Safetensors, RejectsOversizedHeader) {
  TempDir dir;
  write_bytes(dir.file("t.safetensors"), make_file("{}", "", 1ull << 40));
  EXPECT_NE(open_error(dir.file("t.safetensors")).find("exceeds the limit"), std::string::npos);
}

TEST(Safetensors, RejectsMalformedHeaderJson) {
  TempDir dir;
  write_bytes(dir.file("t.safetensors"), make_file("{\"a\": [", ""));
  EXPECT_NE(open_error(dir.file("t.safetensors")).find("malformed JSON"), std::string::npos);
}

TEST(Safetensors, RejectsOverlappingOffsets) {
  TempDir dir;
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  write_bytes(dir.file("t.safetensors"), make_file(header, std::string(8, '\0')));
  std::string error = open_error(dir.file("t.safetensors"));
  EXPECT_NE(error.find("overlaps"), std::string::npos) << error;
}

TEST(Safetensors, RejectsOffsetsPastTheFile) {
  TempDir dir;
  const std::string header = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  write_bytes(dir.file("t.safetensors"), make_file(header, std::string(8, '\0')));
  std::string error = open_error(dir.file("t.safetensors"));
  EXPECT_NE(error.find("run past the end of the data"), std::string::npos) << error;
  EXPECT_NE(error.find("'a'"), std::string::npos) << error;
}

TEST(Safetensors, RejectsSizeThatDoesNotMatchShape) {
  TempDir dir;
  const std::string header = R"({"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}})";
  write_bytes(dir.file("t.safetensors"), make_file(header, std::string(4, '\0')));
  std::string error = open_error(dir.file("t.safetensors"));
  EXPECT_NE(error.find("needs 6"), std::string::npos) << error;
}

TEST(Safetensors, RejectsTrailingBytesAndGaps) {
  TempDir dir;
  const std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  write_bytes(dir.file("t.safetensors"), make_file(header, std::string(12, '\0')));
  EXPECT_NE(open_error(dir.file("t.safetensors")).find("file length does not match"),
            std::string::npos);
  const std::string gap = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  write_bytes(dir.file("g.safetensors"), make_file(gap, std::string(8, '\0')));
  EXPECT_NE(open_error(dir.file("g.safetensors")).find("gap"), std::string::npos);
}

TEST(Safetensors, RejectsUnknownDtype) {
  TempDir dir;
  const std::string header = R"({"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})";
  write_bytes(dir.file("t.safetensors"), make_file(header, std::string(1, '\0')));
  EXPECT_NE(open_error(dir.file("t.safetensors")).find("unsupported dtype 'F8_E4M3'"),
            std::string::npos);
}

TEST(Safetensors, RejectsNonFloatTensorForWeights) {
  TempDir dir;
  const std::string header = R"({"a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})";
  write_bytes(dir.file("t.safetensors"), make_file(header, std::string(4, '\0')));
  auto file = SafetensorsFile::open(dir.file("t.safetensors"));
  ASSERT_TRUE(file.ok());
  float out;
  Status s = tensor_to_f32(*(*file)->find("a"), &out, dir.file("t.safetensors"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("dtype I32"), std::string::npos) << s.error();
}

// A tensor of zero elements (a 0 in its shape, empty data) is valid and converts to nothing;
// its destination may be null (an empty vector's data()). libFuzzer (safetensors, session 10):
// the F32 copy passed that null to memcpy (UBSan). Corpus: crash_zero_element_f32.
TEST(Safetensors, ConvertsZeroElementTensors) {
  TempDir dir;
  const std::string header =
      R"({"e":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]},)"
      R"("h":{"dtype":"BF16","shape":[3,0],"data_offsets":[0,0]}})";
  write_bytes(dir.file("t.safetensors"), make_file(header, ""));
  auto file = SafetensorsFile::open(dir.file("t.safetensors"));
  ASSERT_TRUE(file.ok()) << file.error();
  for (const char* name : {"e", "h"}) {
    const TensorView* t = (*file)->find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->numel(), 0) << name;
    EXPECT_TRUE(tensor_to_f32(*t, nullptr, dir.file("t.safetensors")).ok()) << name;
  }
}

TEST(Checkpoint, ReportsMissingShard) {
  TempDir dir;
  write_bytes(dir.file("model.safetensors.index.json"),
              R"({"weight_map": {"a": "model-00001-of-00002.safetensors"}})");
  auto weights = CheckpointWeights::open(dir.file(""));
  ASSERT_FALSE(weights.ok());
  EXPECT_NE(weights.error().find("model-00001-of-00002.safetensors"), std::string::npos);
}

// Found by fuzz/checkpoint_index (corpus/checkpoint_index/crash_empty_weight_map): an empty
// weight_map read the first of no shards.
TEST(Checkpoint, RefusesAnEmptyWeightMapAndShardsOutsideTheDirectory) {
  TempDir dir;
  write_bytes(dir.file("model.safetensors.index.json"), R"({"weight_map": {}})");
  auto empty = CheckpointWeights::open(dir.file(""));
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().find("weight_map lists no tensors"), std::string::npos) << empty.error();
  std::vector<float> a = {1};
  ASSERT_TRUE(safetensors_write(dir.file("elsewhere.safetensors"), {{"a", {1}, a.data()}}).ok());
  fs::create_directories(dir.file("ckpt"));
  write_bytes(dir.file("ckpt/model.safetensors.index.json"),
              R"({"weight_map": {"a": "../elsewhere.safetensors"}})");
  auto outside = CheckpointWeights::open(dir.file("ckpt"));
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.error().find("names '../elsewhere.safetensors', not a file name of the checkpoint directory"),
            std::string::npos) << outside.error();
}

TEST(Checkpoint, ReportsTensorAbsentFromItsShard) {
  TempDir dir;
  std::vector<float> a = {1};
  ASSERT_TRUE(safetensors_write(dir.file("s1.safetensors"), {{"a", {1}, a.data()}}).ok());
  write_bytes(dir.file("model.safetensors.index.json"),
              R"({"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors"}})");
  auto weights = CheckpointWeights::open(dir.file(""));
  ASSERT_FALSE(weights.ok());
  EXPECT_NE(weights.error().find("'b'"), std::string::npos) << weights.error();
}

TEST(Checkpoint, ReportsWrongShapeAndMissingTensor) {
  TempDir dir;
  std::vector<float> a = {1, 2};
  ASSERT_TRUE(safetensors_write(dir.file("model.safetensors"), {{"a", {2}, a.data()}}).ok());
  auto weights = CheckpointWeights::open(dir.file(""));
  ASSERT_TRUE(weights.ok()) << weights.error();
  auto wrong = weights->read_f32("a", {1, 2});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().find("has shape [2], expected [1, 2]"), std::string::npos) << wrong.error();
  auto missing = weights->read_f32("b", {2});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("missing tensor 'b'"), std::string::npos);
}

TEST(Checkpoint, ReadsTheShardedDefaultModel) {
  auto weights = CheckpointWeights::open(std::string(GOLINEAR_MODEL_DIR) + "/tiny-llama3-25m");
  ASSERT_TRUE(weights.ok()) << weights.error();
  EXPECT_EQ(weights->storage_dtype(), "BF16");
  EXPECT_TRUE(weights->contains("model.layers.7.mlp.down_proj.weight"));
}

// f32_to_bf16 rounds as CUDA's __float2bfloat16: nearest, ties to even; NaN → 0x7fff.
TEST(Bf16, RoundsToNearestEven) {
  auto bits_of = [](float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
  };
  auto from_bits = [](uint32_t u) {
    float x;
    std::memcpy(&x, &u, 4);
    return x;
  };
  for (uint32_t b : {0x3f80u, 0xbf80u, 0x0000u, 0x8000u, 0x7f80u, 0x0001u, 0x7f7fu})
    EXPECT_EQ(f32_to_bf16(from_bits(b << 16)), b);               // exact values stay
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808000u)), 0x3f80u);       // tie, even below
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f818000u)), 0x3f82u);       // tie, even above
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808001u)), 0x3f81u);       // above the tie
  EXPECT_EQ(f32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80u);       // max float rounds to inf
  EXPECT_EQ(f32_to_bf16(from_bits(0x7fc00001u)), 0x7fffu);       // NaN
  EXPECT_EQ(bits_of(bf16_to_f32(f32_to_bf16(-2.5f))), bits_of(-2.5f));
}

}  // namespace
}  // namespace golinear
