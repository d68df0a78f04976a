// The scoring rules of eval/scoring.h and the metric aggregation of likelihood_report() and
// synthetic_report(), checked against values worked out by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "eval/generation_eval.h"
#include "eval/likelihood_eval.h"
#include "eval/scoring.h"

namespace golinear::eval {
namespace {

TEST(ScoreMultipleChoice, TiesGoToTheFirstIndex) {
  MultipleChoiceScore score = score_multiple_choice({-3.0, -1.0, -1.0}, {2, 4, 4}, 2);
  EXPECT_EQ(score.pred, 1);       // -1 == -1: the first wins
  EXPECT_EQ(score.pred_norm, 1);  // -0.25 == -0.25
  EXPECT_EQ(score.acc, 0.0);
  EXPECT_EQ(score.acc_norm, 0.0);
}

TEST(ScoreMultipleChoice, AccAndAccNormDisagree) {
  // ll: choice 0 is likelier; per character (-10/5 = -2 against -12/20 = -0.6) choice 1 wins.
  MultipleChoiceScore score = score_multiple_choice({-10.0, -12.0}, {5, 20}, 1);
  EXPECT_EQ(score.pred, 0);
  EXPECT_EQ(score.pred_norm, 1);
  EXPECT_EQ(score.acc, 0.0);
  EXPECT_EQ(score.acc_norm, 1.0);
}

TEST(Utf8Length, CountsCodePointsAsPythonLen) {
  EXPECT_EQ(utf8_length("heat"), 4);
  EXPECT_EQ(utf8_length("café"), 4);      // 5 bytes
  EXPECT_EQ(utf8_length("日本"), 2);       // 6 bytes
}

TEST(Stderr, SampleStdOverSqrtN) {
  // [1, 0, 0, 1]: mean 0.5, unbiased variance 1/3, stderr sqrt(1/3)/2.
  EXPECT_NEAR(mean_stderr({1, 0, 0, 1}), std::sqrt(1.0 / 3.0) / 2.0, 1e-12);
  EXPECT_TRUE(std::isnan(mean_stderr({1})));  // lm-eval prints N/A
  // Pooled: groups [1, 0] (se 0.5) and [1, 1] (se 0) equal the stderr of [1, 0, 1, 1]: 0.25.
  EXPECT_NEAR(pooled_sample_stderr({0.5, 0.0}, {2, 2}), 0.25, 1e-12);
  EXPECT_NEAR(mean_stderr({1, 0, 1, 1}), 0.25, 1e-12);
}

TEST(Lambada, PerplexityIsExpOfMinusMeanDocumentLogLikelihood) {
  EXPECT_NEAR(lambada_perplexity({-1.0, -3.0}), std::exp(2.0), 1e-9);
  // Bootstrap stderr: zero spread when every document is the same, finite otherwise.
  EXPECT_NEAR(lambada_perplexity_stderr({-2.0, -2.0, -2.0}, 1000), 0.0, 1e-9);
  const double se = lambada_perplexity_stderr({-1.0, -3.0, -2.0, -0.5}, 2000);
  EXPECT_TRUE(std::isfinite(se) && se > 0);
}

TEST(StringMatchAll, CaseInsensitiveSubstringsTimes100) {
  EXPECT_NEAR(string_match_all("The keys are ABC and def.", {"abc", "DEF", "xyz"}), 200.0 / 3.0, 1e-9);
  EXPECT_EQ(string_match_all("1234567", {"1234567"}), 100.0);
  EXPECT_EQ(string_match_all("123456", {"1234567"}), 0.0);
  EXPECT_EQ(ruler_postprocess_prediction("  a\x01" "b\t \n"), "a\nb");
}

TEST(LikelihoodReport, PiqaAccuracyAndNormalizedAccuracy) {
  // Doc 0: choices "ab" / "abcdef", label 1: ll -2 / -3 → acc 0; per char -1 / -0.5 → acc_norm 1.
  // Doc 1: choices "x" / "y", label 0: ll -1 / -1 (tie → 0) → acc 1, acc_norm 1.
  std::vector<LikelihoodDocument> docs(2);
  docs[0].choices = {"ab", "abcdef"};
  docs[0].label = 1;
  docs[1].choices = {"x", "y"};
  docs[1].label = 0;
  std::vector<std::vector<LoglikelihoodResult>> results = {{{-2, false}, {-3, true}},
                                                           {{-1, true}, {-1, false}}};
  TaskReport report = likelihood_report(LikelihoodTask::piqa, docs, results);
  ASSERT_EQ(report.metrics.size(), 2u);
  EXPECT_EQ(report.metrics[0].metric, "acc");
  EXPECT_DOUBLE_EQ(report.metrics[0].value, 0.5);
  EXPECT_NEAR(report.metrics[0].stderr_value, 0.5, 1e-12);  // sqrt(0.5)/sqrt(2)
  EXPECT_EQ(report.metrics[1].metric, "acc_norm");
  EXPECT_DOUBLE_EQ(report.metrics[1].value, 1.0);
  ASSERT_EQ(report.samples.size(), 2u);
  EXPECT_EQ(report.samples[0]["pred"], 0);
  EXPECT_EQ(report.samples[0]["pred_norm"], 1);
  EXPECT_EQ(report.samples[0]["correct"], false);
  EXPECT_EQ(report.samples[0]["is_greedy"], Json::array({false, true}));
  EXPECT_EQ(report.samples[1]["index"], 1);
}

TEST(LikelihoodReport, LambadaPerplexityAndGreedyAccuracy) {
  std::vector<LikelihoodDocument> docs(3);
  for (auto& doc : docs) doc.choices = {"word"};
  std::vector<std::vector<LoglikelihoodResult>> results = {{{-1.0, true}}, {{-2.0, false}}, {{-3.0, true}}};
  TaskReport report = likelihood_report(LikelihoodTask::lambada, docs, results);
  ASSERT_EQ(report.metrics.size(), 2u);
  EXPECT_EQ(report.metrics[0].metric, "perplexity");
  EXPECT_NEAR(report.metrics[0].value, std::exp(2.0), 1e-9);
  EXPECT_EQ(report.metrics[1].metric, "acc");
  EXPECT_NEAR(report.metrics[1].value, 2.0 / 3.0, 1e-12);
  EXPECT_EQ(report.samples[1]["correct"], false);
}

TEST(LikelihoodReport, MmluQuestionWeightedAndSubjectMeans) {
  // Subject a: 1 of 1 right; subject b: 1 of 3 right. Question-weighted 2/4 = 0.5;
  // mean over subjects (1 + 1/3) / 2 = 2/3.
  std::vector<LikelihoodDocument> docs(4);
  const char* subjects[] = {"a", "b", "b", "b"};
  const int labels[] = {0, 0, 1, 2};
  for (int d = 0; d < 4; ++d) {
    docs[d].choices = {"A", "B", "C", "D"};
    docs[d].subject = subjects[d];
    docs[d].label = labels[d];
  }
  auto answer = [](int k) {
    std::vector<LoglikelihoodResult> lls(4, {-5.0, false});
    lls[k].ll = -1.0;
    return lls;
  };
  TaskReport report = likelihood_report(LikelihoodTask::mmlu, docs, {answer(0), answer(0), answer(0), answer(0)});
  ASSERT_EQ(report.metrics.size(), 4u);
  EXPECT_EQ(report.metrics[0].metric, "acc");
  EXPECT_DOUBLE_EQ(report.metrics[0].value, 0.5);
  EXPECT_EQ(report.metrics[1].metric, "acc_subject_mean");
  EXPECT_NEAR(report.metrics[1].value, 2.0 / 3.0, 1e-12);
  EXPECT_EQ(report.metrics[2].task, "mmlu_a");
  EXPECT_EQ(report.metrics[3].task, "mmlu_b");
  EXPECT_NEAR(report.metrics[3].value, 1.0 / 3.0, 1e-12);
}

TEST(SyntheticReport, MeanOverSamplesPerTaskAndDepth) {
  std::vector<SyntheticSample> samples(3);
  for (auto& s : samples) {
    s.task = "niah_single_1";
    s.needles = {"needle"};
  }
  samples[0].references = {"1234567"};
  samples[0].depths = {0};
  samples[1].references = {"7654321"};
  samples[1].depths = {50};
  samples[2].references = {"1111111"};
  samples[2].depths = {50};
  TaskReport report = synthetic_report("niah_single_1", samples,
                                       {"it is 1234567.", "THE NUMBER 7654321", "no idea"});
  ASSERT_EQ(report.metrics.size(), 3u);
  EXPECT_NEAR(report.metrics[0].value, 200.0 / 3.0, 1e-9);
  EXPECT_EQ(report.metrics[1].task, "niah_single_1@depth=0");
  EXPECT_EQ(report.metrics[1].value, 100.0);
  EXPECT_EQ(report.metrics[2].task, "niah_single_1@depth=50");
  EXPECT_EQ(report.metrics[2].value, 50.0);
  EXPECT_EQ(report.samples[2]["generation"], "no idea");
  EXPECT_EQ(report.samples[2]["score"], 0.0);
}

}  // namespace
}  // namespace golinear::eval
