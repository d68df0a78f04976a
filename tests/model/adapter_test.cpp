// Adapters (model/linearization.h): a directory with only linearization.{json,safetensors} that
// names its base loads as the same model as the linearized checkpoint holding the base's files
// (identical logits); a base that is not the recorded one, or is not there, is refused in one
// line naming both directories; a relative base path moves with the two directories.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/file.h"
#include "common/json.h"
#include "io/checkpoint.h"
#include "mixers/mixer_factory.h"
#include "model/linearization.h"
#include "model/transformer.h"

namespace golinear {
namespace {

namespace fs = std::filesystem;

const std::string kFixtures = std::string(GOLINEAR_TEST_DATA) + "/fixtures/";

class Adapter : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("golinear_adapter_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "models");
    // From dir_, with relative paths, as a user in a repository would: the adapter records
    // "../base".
    cwd_ = fs::current_path();
    fs::current_path(dir_);
    base_ = "models/base";
    fs::copy(kFixtures + "random-llama", base_);
    // One recipe (layer 0 hybrid, layer 1 softmax, parameters away from their init), written
    // as a linearized checkpoint `full_` and as an adapter `adapter_` of base_.
    auto model = model_load(base_);
    ASSERT_TRUE(model.ok()) << model.error();
    mixers::MixerOptions options;
    options.sinks = 2;
    options.window = 3;
    auto stack = linearized_mixers(**model, options, {1}, 5);
    ASSERT_TRUE(stack.ok()) << stack.error();
    (*model)->mixers = std::move(*stack);
    for (mixers::Parameter* p : (*model)->mixers[0]->parameters())
      for (size_t i = 0; i < p->value.size(); ++i) p->value[i] += 0.1f * ((float)(i % 7) - 3.0f);
    LinearizationRecipe recipe = linearization_recipe_of(**model, options);
    full_ = "full";
    ASSERT_TRUE(checkpoint_copy_base(base_, full_).ok());
    ASSERT_TRUE(linearization_save(**model, recipe, full_).ok());
    adapter_ = "models/student";
    auto reference = base_reference_make(base_, adapter_);
    ASSERT_TRUE(reference.ok()) << reference.error();
    recipe.base = *reference;
    fs::create_directories(adapter_);
    ASSERT_TRUE(linearization_save(**model, recipe, adapter_).ok());
  }
  void TearDown() override {
    fs::current_path(cwd_);
    fs::remove_all(dir_);
  }

  // Logits (T, V) of `dir` on a fixed sequence.
  static std::vector<float> logits_of(const std::string& dir) {
    auto model = model_load(dir);
    EXPECT_TRUE(model.ok()) << model.error();
    if (!model.ok()) return {};
    std::vector<int32_t> ids;
    for (int t = 0; t < 12; ++t) ids.push_back((int32_t)((t * 577 + 3) % (*model)->config.vocab_size));
    std::vector<float> logits(ids.size() * (size_t)(*model)->config.vocab_size);
    model_forward(**model, ids.data(), (int)ids.size(), logits.data());
    return logits;
  }
  static std::string error_of(const std::string& dir) {
    auto model = model_load(dir);
    return model.ok() ? "(loaded)" : model.error();
  }

  fs::path dir_, cwd_;
  std::string base_, full_, adapter_;
};

TEST_F(Adapter, LoadsAsTheLinearizedCheckpoint) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(adapter_)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"linearization.json", "linearization.safetensors"}));
  const Json json = json_read_file(adapter_ + "/linearization.json").value();
  EXPECT_EQ(json["base"]["path"], "../base");  // relative to the adapter's directory
  EXPECT_EQ(json["base"]["num_hidden_layers"], 2);
  EXPECT_EQ(json["base"]["fingerprint"], checkpoint_fingerprint(base_).value());

  const std::vector<float> full = logits_of(full_), adapter = logits_of(adapter_);
  const std::vector<float> teacher = logits_of(base_);
  ASSERT_FALSE(full.empty());
  EXPECT_EQ(adapter, full);     // bit for bit
  EXPECT_NE(adapter, teacher);  // the linearization was applied

  auto where = model_directory_resolve(adapter_);
  ASSERT_TRUE(where.ok()) << where.error();
  EXPECT_TRUE(where->is_adapter());
  EXPECT_EQ(where->base_recorded, "../base");
  EXPECT_EQ(where->base, "models/base");  // models/student/../base
  EXPECT_EQ(where->linearization, adapter_);
  auto plain = model_directory_resolve(full_);
  ASSERT_TRUE(plain.ok()) << plain.error();
  EXPECT_FALSE(plain->is_adapter());
  EXPECT_EQ(plain->base, full_);

  // The loader of the GPU path starts from the skeleton: config and mixers, no weights.
  auto skeleton = model_load(adapter_, ModelLoadParts::without_backbone);
  ASSERT_TRUE(skeleton.ok()) << skeleton.error();
  EXPECT_FALSE((*skeleton)->has_backbone());
  EXPECT_EQ((*skeleton)->mixers[0]->kind(), "gdn");
}

TEST_F(Adapter, AnotherBaseIsRefusedNamingBothAndWhatDiffers) {
  // An edited config.json.
  std::string config = file_read_text(base_ + "/config.json").value();
  std::ofstream(base_ + "/config.json", std::ios::trunc) << config << " ";
  std::string error = error_of(adapter_);
  EXPECT_NE(error.find("config.json differs"), std::string::npos) << error;
  EXPECT_NE(error.find(adapter_), std::string::npos) << error;
  EXPECT_NE(error.find("models/base"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  std::ofstream(base_ + "/config.json", std::ios::trunc) << config;
  EXPECT_EQ(error_of(adapter_), "(loaded)");
  // Another model of another architecture where the base was.
  fs::remove_all(base_);
  fs::copy(kFixtures + "random-qwen3", base_);
  error = error_of(adapter_);
  EXPECT_NE(error.find("is not the one this adapter was made from"), std::string::npos) << error;
}

TEST_F(Adapter, AMissingBaseIsRefused) {
  fs::remove_all(base_);
  const std::string error = error_of(adapter_);
  EXPECT_NE(error.find("base checkpoint '../base'"), std::string::npos) << error;
  EXPECT_NE(error.find("does not exist"), std::string::npos) << error;
}

TEST_F(Adapter, ARelativeBaseMovesWithIt) {
  const std::vector<float> before = logits_of(adapter_);
  const fs::path moved = dir_ / "elsewhere" / "deeper";
  fs::create_directories(moved.parent_path());
  fs::rename(dir_ / "models", moved);
  EXPECT_EQ(logits_of((moved / "student").string()), before);
  // The adapter alone, away from its base, finds nothing.
  fs::rename(moved / "student", dir_ / "student");
  EXPECT_NE(error_of((dir_ / "student").string()).find("does not exist"), std::string::npos);
}

TEST_F(Adapter, AnAbsolutePathIsKeptAndATrailingSlashDropped) {
  const std::string absolute_base = (dir_ / "models" / "." / "base" / "").string();
  auto absolute = base_reference_make(absolute_base, "/somewhere/else");
  ASSERT_TRUE(absolute.ok()) << absolute.error();
  EXPECT_EQ(absolute->path, (dir_ / "models" / "base").string());
  auto relative = base_reference_make("models/base/", "out/students/one");
  ASSERT_TRUE(relative.ok()) << relative.error();
  EXPECT_EQ(relative->path, "../../../models/base");
}

TEST_F(Adapter, OwnCheckpointFilesOrALinearizedBaseAreRefused) {
  fs::copy_file(base_ + "/config.json", adapter_ + "/config.json");
  EXPECT_NE(error_of(adapter_).find("also holds its own config.json"), std::string::npos) << error_of(adapter_);
  fs::remove(adapter_ + "/config.json");
  // An adapter whose base is a linearized checkpoint.
  Json json = json_read_file(adapter_ + "/linearization.json").value();
  json["base"]["path"] = (dir_ / full_).string();
  std::ofstream(adapter_ + "/linearization.json", std::ios::trunc) << json.dump(2);
  EXPECT_NE(error_of(adapter_).find("is itself linearized"), std::string::npos) << error_of(adapter_);
}

}  // namespace
}  // namespace golinear
