// The random checkpoint writer (io/random_checkpoint.h) on the fixtures' tiny configs: every
// tensor of the architecture with its shape in bf16, the Hub's sharding and index, values that
// depend on the seed only, and one clear line for each kind of bad request.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/file.h"
#include "common/json.h"
#include "io/checkpoint.h"
#include "io/config.h"
#include "io/random_checkpoint.h"
#include "io/safetensors.h"

namespace golinear {
namespace {

namespace fs = std::filesystem;

const std::string kFixtures = std::string(GOLINEAR_TEST_DATA) + "/fixtures/";

class RandomCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("golinear_random_ckpt_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  RandomCheckpointOptions options(const std::string& fixture, const std::string& out) const {
    RandomCheckpointOptions o;
    o.config_path = kFixtures + fixture + "/config.json";
    o.tokenizer = kFixtures + fixture;
    o.out = (dir_ / out).string();
    o.seed = 7;
    return o;
  }
  static std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  fs::path dir_;
};

// Every tensor of the table, bf16, with its shape; norms 1, matrices of standard deviation 0.02.
void expect_complete(const std::string& dir, const ModelConfig& config) {
  auto weights = CheckpointWeights::open(dir);
  ASSERT_TRUE(weights.ok()) << weights.error();
  for (const TensorSpec& t : checkpoint_tensor_specs(config)) {
    auto found = weights->find(t.name, t.shape);
    ASSERT_TRUE(found.ok()) << found.error();
    EXPECT_EQ(found->view->dtype, DType::BF16) << t.name;
    auto values = weights->read_f32(t.name, t.shape);
    ASSERT_TRUE(values.ok()) << values.error();
    double sum = 0, sum2 = 0;
    for (float v : *values) sum += v, sum2 += (double)v * v;
    const double n = (double)values->size(), mean = sum / n, sd = std::sqrt(sum2 / n - mean * mean);
    const bool norm = t.name.find("norm") != std::string::npos;
    if (norm) {
      EXPECT_EQ(mean, 1.0) << t.name;
    } else if (n >= 4096) {
      EXPECT_NEAR(mean, 0.0, 0.002) << t.name;
      EXPECT_NEAR(sd, 0.02, 0.002) << t.name;
    }
  }
  EXPECT_EQ(config.tie_word_embeddings, !weights->contains("lm_head.weight"));
}

TEST_F(RandomCheckpoint, EveryFamilyWritesEveryTensorInBf16) {
  for (const std::string fixture : {"random-llama", "random-qwen2", "random-qwen3"}) {
    SCOPED_TRACE(fixture);
    const RandomCheckpointOptions o = options(fixture, fixture);
    auto summary = random_checkpoint_write(o);
    ASSERT_TRUE(summary.ok()) << summary.error();
    EXPECT_EQ(summary->shards, 1);
    EXPECT_TRUE(file_exists(o.out + "/model.safetensors"));
    EXPECT_FALSE(file_exists(o.out + "/model.safetensors.index.json"));
    EXPECT_TRUE(file_exists(o.out + "/tokenizer.json"));
    EXPECT_TRUE(file_exists(o.out + "/tokenizer_config.json"));
    EXPECT_FALSE(fs::exists(o.out + ".partial"));
    EXPECT_EQ(slurp(o.out + "/config.json"), slurp(o.config_path));
    auto config = model_config_read(o.out + "/config.json");
    ASSERT_TRUE(config.ok()) << config.error();
    EXPECT_EQ(summary->parameters, model_config_parameter_count(*config));
    EXPECT_EQ(summary->total_bytes, (uint64_t)summary->parameters * 2);
    expect_complete(o.out, *config);
  }
}

TEST_F(RandomCheckpoint, ShardsAndIndexAsTheHubWritesThem) {
  RandomCheckpointOptions o = options("random-qwen3", "sharded");
  o.max_shard_bytes = 300000;  // the embedding (8192 × 64 bf16 = 1 MiB) gets a shard of its own
  auto summary = random_checkpoint_write(o);
  ASSERT_TRUE(summary.ok()) << summary.error();
  ASSERT_GT(summary->shards, 2);
  auto index = json_read_file(o.out + "/model.safetensors.index.json");
  ASSERT_TRUE(index.ok()) << index.error();
  EXPECT_EQ((*index)["metadata"]["total_size"].get<uint64_t>(), summary->total_bytes);
  auto config = model_config_read(o.out + "/config.json");
  ASSERT_TRUE(config.ok());
  const auto specs = checkpoint_tensor_specs(*config);
  EXPECT_EQ((*index)["weight_map"].size(), specs.size());
  uint64_t bytes_in_shards = 0;
  for (int i = 1; i <= summary->shards; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", i, summary->shards);
    auto shard = SafetensorsFile::open(o.out + "/" + name);
    ASSERT_TRUE(shard.ok()) << shard.error();
    uint64_t shard_bytes = 0;
    for (const TensorView& t : (*shard)->tensors()) {
      EXPECT_EQ((*index)["weight_map"][t.name], name) << t.name;
      shard_bytes += t.nbytes;
    }
    // Only a tensor larger than the limit makes a shard pass it, alone.
    if (shard_bytes > o.max_shard_bytes) {
      EXPECT_EQ((*shard)->tensors().size(), 1u);
    }
    bytes_in_shards += shard_bytes;
  }
  EXPECT_EQ(bytes_in_shards, summary->total_bytes);
  // The first shard starts with the embedding, the last ends with lm_head (the Hub's order).
  EXPECT_EQ((*index)["weight_map"]["model.embed_tokens.weight"], "model-00001-of-" +
            std::string(5 - std::to_string(summary->shards).size(), '0') +
            std::to_string(summary->shards) + ".safetensors");
  expect_complete(o.out, *config);
}

TEST_F(RandomCheckpoint, ValuesDependOnTheSeedOnly) {
  RandomCheckpointOptions a = options("random-llama", "a"), b = options("random-llama", "b"),
                          c = options("random-llama", "c"), d = options("random-llama", "d");
  c.seed = 8;
  d.max_shard_bytes = 200000;  // sharded differently, same values
  for (const auto* o : {&a, &b, &c, &d}) {
    auto written = random_checkpoint_write(*o);
    ASSERT_TRUE(written.ok()) << written.error();
  }
  EXPECT_EQ(slurp(a.out + "/model.safetensors"), slurp(b.out + "/model.safetensors"));
  EXPECT_NE(slurp(a.out + "/model.safetensors"), slurp(c.out + "/model.safetensors"));
  auto wa = CheckpointWeights::open(a.out), wd = CheckpointWeights::open(d.out);
  ASSERT_TRUE(wa.ok() && wd.ok());
  auto config = model_config_read(a.config_path);
  ASSERT_TRUE(config.ok());
  for (const TensorSpec& t : checkpoint_tensor_specs(*config)) {
    auto x = wa->read_f32(t.name, t.shape), y = wd->read_f32(t.name, t.shape);
    ASSERT_TRUE(x.ok() && y.ok());
    EXPECT_EQ(*x, *y) << t.name;
  }
}

TEST_F(RandomCheckpoint, BadRequestsGetOneClearLine) {
  RandomCheckpointOptions o = options("random-llama", "out");
  ASSERT_TRUE(random_checkpoint_write(o).ok());
  auto again = random_checkpoint_write(o);  // the directory exists now
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().find("already exists"), std::string::npos) << again.error();
  EXPECT_EQ(again.error().find('\n'), std::string::npos);

  const std::string bad_config = (dir_ / "config.json").string();
  std::ofstream(bad_config) << R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64})";
  RandomCheckpointOptions bad = options("random-llama", "bad");
  bad.config_path = bad_config;
  auto refused = random_checkpoint_write(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().find(bad_config), std::string::npos) << refused.error();
  EXPECT_EQ(refused.error().find('\n'), std::string::npos);
  EXPECT_FALSE(fs::exists(bad.out));
  EXPECT_FALSE(fs::exists(bad.out + ".partial"));

  RandomCheckpointOptions no_tokenizer = options("random-llama", "none");
  no_tokenizer.tokenizer = (dir_ / "missing").string();
  auto missing = random_checkpoint_write(no_tokenizer);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("missing"), std::string::npos) << missing.error();
}

TEST(ByteSize, HubSuffixes) {
  EXPECT_EQ(byte_size_parse("5GB", "x").value(), 5000000000ull);
  EXPECT_EQ(byte_size_parse("500MB", "x").value(), 500000000ull);
  EXPECT_EQ(byte_size_parse("2GiB", "x").value(), 2ull << 30);
  EXPECT_EQ(byte_size_parse("4096", "x").value(), 4096ull);
  EXPECT_EQ(byte_size_parse("1.5KB", "x").value(), 1500ull);
  for (const char* bad : {"", "GB", "5XB", "-1GB", "0", "5 GB"}) {
    auto r = byte_size_parse(bad, "--max-shard-size");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().find("--max-shard-size"), std::string::npos);
  }
}

}  // namespace
}  // namespace golinear
