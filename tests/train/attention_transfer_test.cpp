// Attention transfer: the loss and its gradient, the optimizer, and training on a random-weight
// fixture (the loss falls, only the new parameters change, a resumed run equals an
// uninterrupted one).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "common/file.h"
#include "io/checkpoint.h"
#include "model/linearization.h"
#include "train/attention_transfer.h"

namespace golinear::train {
namespace {

const std::string kFixture = std::string(GOLINEAR_TEST_DATA) + "/fixtures/random-llama";

TEST(NmseLoss, ValueAndGradientMatchFiniteDifferences) {
  std::vector<float> s = {0.5f, -1.0f, 2.0f, 0.25f}, t = {1.0f, -0.5f, 1.5f, 0.0f}, dy(4);
  // Σ(s−t)² = 0.25 + 0.25 + 0.25 + 0.0625 = 0.8125;  Σt² = 1 + 0.25 + 2.25 = 3.5
  EXPECT_NEAR(nmse_loss(s.data(), t.data(), 4, dy.data()), 0.8125 / 3.5, 1e-7);
  for (int i = 0; i < 4; ++i) {
    std::vector<float> plus = s, minus = s;
    plus[i] += 1e-3f;
    minus[i] -= 1e-3f;
    double fd = (nmse_loss(plus.data(), t.data(), 4, nullptr) -
                 nmse_loss(minus.data(), t.data(), 4, nullptr)) / 2e-3;
    EXPECT_NEAR(dy[i], fd, 1e-4);
  }
}

TEST(AdamW, MinimisesAQuadraticAndClips) {
  mixers::Parameter p{"p", {2}, {3.0f, -2.0f}, {0.0f, 0.0f}};
  AdamW opt({&p}, {});
  for (int i = 0; i < 500; ++i) {
    p.grad = {2 * p.value[0], 2 * p.value[1]};  // ∇ of x² + y²
    opt.step(0.05f);
  }
  EXPECT_NEAR(p.value[0], 0.0f, 1e-2);
  EXPECT_NEAR(p.value[1], 0.0f, 1e-2);
  p.grad = {30.0f, 40.0f};
  EXPECT_FLOAT_EQ(opt.grad_norm(), 50.0f);
}

TEST(Schedule, WarmsUpThenDecaysToTheFloor) {
  EXPECT_FLOAT_EQ(learning_rate_at(0, 100, 10, 1.0f), 0.1f);
  EXPECT_FLOAT_EQ(learning_rate_at(9, 100, 10, 1.0f), 1.0f);
  EXPECT_FLOAT_EQ(learning_rate_at(10, 100, 10, 1.0f), 1.0f);
  EXPECT_NEAR(learning_rate_at(55, 100, 10, 1.0f), 0.55f, 1e-6);  // halfway: (0.1 + 1)/2
  EXPECT_NEAR(learning_rate_at(100, 100, 10, 1.0f), 0.1f, 1e-6);
}

// Random-token sequences for the fixture (its tokenizer is irrelevant here).
PackedDataset random_sequences(int n, int T, int V) {
  PackedDataset data;
  data.seq_len = T;
  uint64_t state = 12345;
  for (int i = 0; i < n * T; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    data.tokens.push_back(i % T == 0 ? 0 : (int32_t)((state >> 33) % V));
  }
  return data;
}

std::vector<float> flatten(MixerStack& stack) {
  std::vector<float> all;
  for (auto* p : trainable_parameters(stack)) all.insert(all.end(), p->value.begin(), p->value.end());
  return all;
}

struct StudentSetup {
  std::unique_ptr<Model> model;
  MixerStack students;
};

StudentSetup make_setup(mixers::MixerOptions options) {
  StudentSetup s;
  auto model = model_load(kFixture);
  EXPECT_TRUE(model.ok()) << model.error();
  s.model = std::move(*model);
  auto students = linearized_mixers(*s.model, options, {}, 7);
  EXPECT_TRUE(students.ok()) << students.error();
  s.students = std::move(*students);
  return s;
}

mixers::MixerOptions small_recipe() {
  mixers::MixerOptions o;
  o.sinks = 2;
  o.window = 6;
  return o;
}

TEST(AttentionTransfer, LowersTheLossAndTouchesOnlyNewParameters) {
  StudentSetup s = make_setup(small_recipe());
  const std::vector<float> embed_before = s.model->embed;
  const std::vector<float> before = flatten(s.students);
  PackedDataset data = random_sequences(4, 48, s.model->config.vocab_size);
  TrainOptions options;
  options.steps = 40;
  options.lr = 1e-2f;
  options.warmup = 2;
  auto report = attention_transfer(*s.model, s.students, data, options);
  ASSERT_TRUE(report.ok()) << report.error();
  ASSERT_EQ(report->loss_curve.size(), 40u);
  double first = (report->loss_curve[0] + report->loss_curve[1] + report->loss_curve[2] + report->loss_curve[3]) / 4;
  double last = (report->loss_curve[36] + report->loss_curve[37] + report->loss_curve[38] + report->loss_curve[39]) / 4;
  EXPECT_LT(last, 0.8 * first) << "first " << first << " last " << last;
  EXPECT_NE(flatten(s.students), before);
  EXPECT_EQ(s.model->embed, embed_before);
  for (const auto& mixer : s.model->mixers) EXPECT_EQ(mixer->kind(), "softmax");
}

TEST(AttentionTransfer, ResumeEqualsAnUninterruptedRun) {
  namespace fs = std::filesystem;
  const std::string state = (fs::temp_directory_path() / ("golinear_resume_" + std::to_string(::getpid()) + ".safetensors")).string();
  PackedDataset data = random_sequences(3, 40, 8192);
  TrainOptions options;
  options.steps = 6;
  options.lr = 1e-2f;
  options.warmup = 2;

  StudentSetup straight = make_setup(small_recipe());
  ASSERT_TRUE(attention_transfer(*straight.model, straight.students, data, options).ok());

  StudentSetup interrupted = make_setup(small_recipe());
  TrainOptions first = options;
  first.state_path = state;
  first.stop_after = 4;
  auto partial = attention_transfer(*interrupted.model, interrupted.students, data, first);
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->steps_done, 4);

  StudentSetup resumed = make_setup(small_recipe());  // a fresh process: parameters re-initialised
  TrainOptions second = options;
  second.state_path = state;
  second.resume = true;
  auto rest = attention_transfer(*resumed.model, resumed.students, data, second);
  ASSERT_TRUE(rest.ok()) << rest.error();
  EXPECT_EQ(rest->steps_done, 6);
  EXPECT_EQ(flatten(resumed.students), flatten(straight.students));
  fs::remove(state);
}

TEST(AttentionTransfer, SeveralRecipesAtOnceEqualEachAlone) {
  PackedDataset data = random_sequences(2, 40, 8192);
  TrainOptions options;
  options.steps = 4;
  options.lr = 1e-2f;
  mixers::MixerOptions pure;
  pure.kind = mixers::MixerKind::gla;
  pure.sinks = pure.window = 0;
  StudentSetup a = make_setup(small_recipe()), b = make_setup(pure);
  auto together = attention_transfer_many(*a.model, {&a.students, &b.students}, data, options, {"", ""});
  ASSERT_TRUE(together.ok()) << together.error();
  StudentSetup a_alone = make_setup(small_recipe()), b_alone = make_setup(pure);
  auto ra = attention_transfer(*a_alone.model, a_alone.students, data, options);
  auto rb = attention_transfer(*b_alone.model, b_alone.students, data, options);
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(flatten(a.students), flatten(a_alone.students));
  EXPECT_EQ(flatten(b.students), flatten(b_alone.students));
  EXPECT_EQ((*together)[0].loss_curve, ra->loss_curve);
  EXPECT_EQ((*together)[1].loss_curve, rb->loss_curve);
}

TEST(Linearization, SaveLoadRoundTripIsExact) {
  namespace fs = std::filesystem;
  StudentSetup s = make_setup(small_recipe());
  PackedDataset data = random_sequences(2, 32, s.model->config.vocab_size);
  TrainOptions options;
  options.steps = 3;
  ASSERT_TRUE(attention_transfer(*s.model, s.students, data, options).ok());
  s.model->mixers = std::move(s.students);
  const fs::path dir = fs::temp_directory_path() / ("golinear_lin_" + std::to_string(::getpid()));
  ASSERT_TRUE(checkpoint_copy_base(kFixture, dir.string()).ok());
  ASSERT_TRUE(linearization_save(*s.model, linearization_recipe_of(*s.model, small_recipe()), dir.string()).ok());
  auto loaded = model_load(dir.string());
  ASSERT_TRUE(loaded.ok()) << loaded.error();
  const int T = 20, V = s.model->config.vocab_size;
  std::vector<int32_t> ids(data.sequence(1), data.sequence(1) + T);
  std::vector<float> a((long)T * V), b((long)T * V);
  model_forward(*s.model, ids.data(), T, a.data());
  model_forward(**loaded, ids.data(), T, b.data());
  EXPECT_EQ(a, b);  // bit-exact: the same fp32 parameters through the same code

  // A recipe made for another model is refused with the reason.
  Json json = Json::parse(file_read_text((dir / "linearization.json").string()).value());
  json["base"]["hidden_size"] = 4096;
  ASSERT_TRUE(file_write_atomic((dir / "linearization.json").string(), json.dump()).ok());
  auto mismatched = model_load(dir.string());
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(mismatched.error().find("hidden_size"), std::string::npos) << mismatched.error();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace golinear::train
