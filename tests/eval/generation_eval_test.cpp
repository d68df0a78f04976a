// The synthetic tasks' evaluation run `batch` samples at a time over CPU sequence slots
// (eval::synthetic_evaluate with NewSlots) against the one-sample-at-a-time run, on the
// random-llama fixture and its tokenizer: niah, vt and fwe samples of different lengths and
// budgets (12 to 32 tokens), an EOS that ends one sample's generation early; the reports are equal whatever the
// batch (1, 2, more than the samples). A prompt too long for the limit is refused before any slot
// is created.
#include <gtest/gtest.h>

#include "eval/generation_eval.h"
#include "runtime/cpu_sequence_slots.h"

namespace golinear::eval {
namespace {

const std::string kFixture = std::string(GOLINEAR_TEST_DATA) + "/fixtures/random-llama";

struct Fixture {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<SyntheticSample> samples;
};

Fixture load_fixture() {
  Fixture f;
  auto model = model_load(kFixture);
  EXPECT_TRUE(model.ok()) << model.error();
  auto tokenizer = Tokenizer::load(kFixture + "/tokenizer.json");
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.error();
  if (!model.ok() || !tokenizer.ok()) return f;
  f.model = std::move(*model);
  f.tokenizer = std::make_unique<Tokenizer>(std::move(*tokenizer));
  const Tokenizer& t = *f.tokenizer;
  TokenCounter count = [&t](const std::string& text) { return (long)t.encode(text, true).size(); };
  SyntheticRandom random(3);
  auto niah = niah_config(1);
  EXPECT_TRUE(niah.ok());
  for (double depth : {0.0, 50.0, 100.0}) {
    niah->depths = {depth};
    auto sample = needle_sample_generate(*niah, 320 + 64 * (long)depth / 50, count, random);
    EXPECT_TRUE(sample.ok()) << sample.error();
    if (sample.ok()) f.samples.push_back(std::move(*sample));
  }
  auto vt = variable_tracking_sample_generate(400, count, random);
  auto fwe = frequent_words_sample_generate(500, count, random);
  EXPECT_TRUE(vt.ok() && fwe.ok());
  if (vt.ok()) f.samples.push_back(std::move(*vt));
  if (fwe.ok()) f.samples.push_back(std::move(*fwe));
  // Shorter budgets than the tasks' (a fast test), still different per sample.
  for (size_t i = 0; i < f.samples.size(); ++i) f.samples[i].max_new_tokens = 12 + 5 * (int)i;
  return f;
}

NewSlots cpu_slots(const Model& model, int* created) {
  return [&model, created](int count, long) -> Result<std::unique_ptr<runtime::SequenceSlots>> {
    ++*created;
    return std::unique_ptr<runtime::SequenceSlots>(new runtime::CpuSequenceSlots(model, count));
  };
}

TEST(SyntheticEvaluate, BatchedReportEqualsOneAtATime) {
  Fixture f = load_fixture();
  ASSERT_TRUE(f.model);
  ASSERT_EQ(f.samples.size(), 5u);
  GenerationEvalOptions options;
  // EOS: the token sample 1 generates at its 4th step, so that its generation ends there.
  const std::vector<int32_t> prompt1 = f.tokenizer->encode(f.samples[1].prompt, true);
  const std::vector<int32_t> free_run = greedy_generate(*f.model, prompt1, 8, {});
  ASSERT_EQ(free_run.size(), 8u);
  f.model->config.eos_token_ids = {free_run[3]};
  const std::vector<int32_t> stopped =
      greedy_generate(*f.model, prompt1, f.samples[1].max_new_tokens, f.model->config.eos_token_ids);
  ASSERT_LE(stopped.size(), 4u);  // the early end this test is about happens

  auto want = synthetic_evaluate(*f.model, *f.tokenizer, "mixed", f.samples, options);
  ASSERT_TRUE(want.ok()) << want.error();
  ASSERT_EQ(want->samples.size(), 5u);
  for (int batch : {1, 2, 7}) {
    int created = 0;
    auto got = synthetic_evaluate(cpu_slots(*f.model, &created), batch, f.model->config,
                                  *f.tokenizer, "mixed", f.samples, options);
    ASSERT_TRUE(got.ok()) << got.error();
    EXPECT_EQ(created, 1);
    EXPECT_EQ(report_json(*got), report_json(*want)) << "batch " << batch;
    EXPECT_EQ(got->samples, want->samples) << "batch " << batch;
  }
}

TEST(SyntheticEvaluate, BatchedRefusesTooLongPromptBeforeSlots) {
  Fixture f = load_fixture();
  ASSERT_TRUE(f.model);
  GenerationEvalOptions options;
  options.max_tokens = 200;  // the samples need 320 tokens or more
  int created = 0;
  auto got = synthetic_evaluate(cpu_slots(*f.model, &created), 4, f.model->config, *f.tokenizer,
                                "niah", f.samples, options);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.error().find("exceeds the model's limit of 200 tokens"), std::string::npos)
      << got.error();
  EXPECT_EQ(created, 0);
  auto zero = synthetic_evaluate(cpu_slots(*f.model, &created), 0, f.model->config, *f.tokenizer,
                                 "niah", f.samples, GenerationEvalOptions{});
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error().find("batch"), std::string::npos) << zero.error();
}

}  // namespace
}  // namespace golinear::eval
