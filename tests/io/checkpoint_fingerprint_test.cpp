// checkpoint_fingerprint (io/checkpoint.h), the identity an adapter records for its base: the
// same for a copy, and for each way a base can differ (config, weights of the same shapes,
// sharding, a missing shard) a difference that says which file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/file.h"
#include "common/json.h"
#include "common/sha256.h"
#include "io/checkpoint.h"
#include "io/random_checkpoint.h"

namespace golinear {
namespace {

namespace fs = std::filesystem;

const std::string kFixtures = std::string(GOLINEAR_TEST_DATA) + "/fixtures/";

class Fingerprint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("golinear_fingerprint_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A random checkpoint of the random-llama fixture's architecture.
  std::string random(const std::string& name, uint64_t seed, uint64_t max_shard_bytes) {
    RandomCheckpointOptions o;
    o.config_path = kFixtures + "random-llama/config.json";
    o.tokenizer = kFixtures + "random-llama";
    o.out = (dir_ / name).string();
    o.seed = seed;
    o.max_shard_bytes = max_shard_bytes;
    auto written = random_checkpoint_write(o);
    EXPECT_TRUE(written.ok()) << written.error();
    return o.out;
  }
  static Json fingerprint(const std::string& dir) {
    auto f = checkpoint_fingerprint(dir);
    EXPECT_TRUE(f.ok()) << f.error();
    return f.ok() ? *f : Json();
  }

  fs::path dir_;
};

TEST_F(Fingerprint, ACopyIsTheSameCheckpoint) {
  const fs::path copy = dir_ / "copy";
  fs::copy(kFixtures + "random-llama", copy);
  const Json a = fingerprint(kFixtures + "random-llama"), b = fingerprint(copy.string());
  EXPECT_EQ(a, b);
  EXPECT_EQ(checkpoint_fingerprint_difference(a, b), "");
  EXPECT_EQ(a["method"], "golinear.checkpoint-fingerprint.1");
  EXPECT_EQ(a["sha256"].get<std::string>().size(), 64u);
  // config.json and the weights file, not the other safetensors of the directory.
  EXPECT_EQ(a["files"].size(), 2u);
  EXPECT_EQ(a["files"]["config.json"]["sha256"], sha256_hex(file_read_text(copy.string() + "/config.json").value()));
  EXPECT_EQ(a["files"]["model.safetensors"]["bytes"], fs::file_size(copy / "model.safetensors"));
}

TEST_F(Fingerprint, AnEditedConfigDiffers) {
  const fs::path copy = dir_ / "copy";
  fs::copy(kFixtures + "random-llama", copy);
  const Json before = fingerprint(copy.string());
  std::string config = file_read_text((copy / "config.json").string()).value();
  config.replace(config.find("1e-05"), 5, "1e-06");
  std::ofstream(copy / "config.json", std::ios::trunc) << config;
  EXPECT_EQ(checkpoint_fingerprint_difference(before, fingerprint(copy.string())), "config.json differs");
}

// The same architecture with other weights (a fine-tune, say): headers and sizes agree, the
// sampled data does not. The same weights sharded otherwise: other files.
TEST_F(Fingerprint, OtherWeightsOrShardingDiffer) {
  const Json seven = fingerprint(random("seven", 7, 5000000000ull));
  const Json eight = fingerprint(random("eight", 7 + 1, 5000000000ull));
  EXPECT_EQ(seven["files"]["model.safetensors"]["bytes"], eight["files"]["model.safetensors"]["bytes"]);
  EXPECT_EQ(checkpoint_fingerprint_difference(seven, eight),
            "model.safetensors differs: safetensors header or sampled data");
  const std::string sharded_dir = random("sharded", 7, 1000000);
  const Json sharded = fingerprint(sharded_dir);
  ASSERT_GE(sharded["files"].size(), 3u) << sharded.dump();  // config.json + 2 shards or more
  EXPECT_EQ(checkpoint_fingerprint_difference(seven, sharded), "model.safetensors is missing");
  EXPECT_NE(checkpoint_fingerprint_difference(sharded, seven).find("is missing"), std::string::npos);
  // One byte of tensor data where a sample falls (the first byte of the data).
  const fs::path copy = dir_ / "copy";
  fs::copy(dir_ / "seven", copy);
  {
    std::fstream f(copy / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    uint64_t header = 0;
    f.read(reinterpret_cast<char*>(&header), 8);
    f.seekg(8 + header);
    const char byte = (char)f.get();
    f.seekp(8 + header);
    f.put((char)~byte);
  }
  EXPECT_EQ(checkpoint_fingerprint_difference(seven, fingerprint(copy.string())),
            "model.safetensors differs: safetensors header or sampled data");
}

TEST_F(Fingerprint, ARecordThatIsNoFingerprintIsNamed) {
  const Json actual = fingerprint(kFixtures + "random-llama");
  EXPECT_NE(checkpoint_fingerprint_difference(Json("abc"), actual).find("not one"), std::string::npos);
  Json other_method = actual;
  other_method["method"] = "md5";
  EXPECT_NE(checkpoint_fingerprint_difference(other_method, actual).find("method"), std::string::npos);
  EXPECT_FALSE(checkpoint_fingerprint(dir_.string()).ok());  // no checkpoint there
}

}  // namespace
}  // namespace golinear
