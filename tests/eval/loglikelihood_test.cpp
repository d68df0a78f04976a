// The tokenization split of lm-eval's _encode_pair and the scoring of continuations: by hand on
// tiny logits, and against a plain full forward on the random-weight fixtures.
#include <gtest/gtest.h>

#include <cmath>

#include "eval/loglikelihood.h"

namespace golinear::eval {
namespace {

const std::string kFixtures = std::string(GOLINEAR_TEST_DATA) + "/fixtures/";
const std::string kTokenizer = std::string(GOLINEAR_MODEL_DIR) + "/tiny-llama3-25m/tokenizer.json";

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(RequestTokenize, SplitsWholeAtTheContextLengthWithBos) {
  auto tokenizer = Tokenizer::load(kTokenizer);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error();
  ASSERT_TRUE(tokenizer->bos_id().has_value());
  const int bos = *tokenizer->bos_id();
  TokenizeOptions options;
  options.prefix_token_id = bos;
  // Trailing whitespace of the context moves to the continuation.
  TokenizedRequest request = request_tokenize(*tokenizer, {"Question: why?\nAnswer: ", "Because"}, options);
  EXPECT_EQ(request.context_ids, tokenizer->encode("Question: why?\nAnswer:", true));
  EXPECT_EQ(request.context_ids.front(), bos);
  const std::vector<int32_t> whole = tokenizer->encode("Question: why?\nAnswer: Because", true);
  EXPECT_EQ(concat(request.context_ids, request.continuation_ids), whole);
  EXPECT_EQ(request.continuation_ids, tokenizer->encode(" Because", false));

  // Legacy convention: no BOS anywhere.
  options.add_special = false;
  TokenizedRequest legacy = request_tokenize(*tokenizer, {"Question: why?\nAnswer:", " Because"}, options);
  EXPECT_EQ(legacy.context_ids, tokenizer->encode("Question: why?\nAnswer:", false));
  EXPECT_NE(legacy.context_ids.front(), bos);
  EXPECT_EQ(legacy.continuation_ids, request.continuation_ids);

  // Empty context: the prefix token, then the continuation alone.
  TokenizedRequest empty = request_tokenize(*tokenizer, {"", " earth"}, options);
  EXPECT_EQ(empty.context_ids, std::vector<int32_t>{bos});
  EXPECT_EQ(empty.continuation_ids, tokenizer->encode(" earth", false));
}

TEST(ContinuationLoglikelihood, ByHandOnThreeTokenVocabulary) {
  // Row 0 = (0, 0, 0): log p(0) = −log 3, argmax 0 (first on ties).
  // Row 1 = (1, 2, 0): log p(1) = 2 − log(e + e² + 1), argmax 1.
  const std::vector<float> rows = {0, 0, 0, 1, 2, 0};
  const double expected = -std::log(3.0) + 2.0 - std::log(std::exp(1.0) + std::exp(2.0) + 1.0);
  LoglikelihoodResult greedy = continuation_loglikelihood(rows.data(), 3, {0, 1});
  EXPECT_NEAR(greedy.ll, expected, 1e-6);
  EXPECT_TRUE(greedy.is_greedy);
  LoglikelihoodResult not_greedy = continuation_loglikelihood(rows.data(), 3, {1, 1});
  EXPECT_NEAR(not_greedy.ll, -std::log(3.0) + 2.0 - std::log(std::exp(1.0) + std::exp(2.0) + 1.0), 1e-6);
  EXPECT_FALSE(not_greedy.is_greedy);  // token 1 ties token 0 on row 0; the first index wins
}

// ll and is_greedy by a plain full forward over ctx + cont.
LoglikelihoodResult reference_score(const Model& model, const TokenizedRequest& request) {
  const int V = model.config.vocab_size;
  std::vector<int32_t> ids = concat(request.context_ids, request.continuation_ids);
  const int T = (int)ids.size();
  std::vector<float> logits((long)T * V);
  model_forward(model, ids.data(), T, logits.data());
  const int n = (int)request.continuation_ids.size();
  return continuation_loglikelihood(logits.data() + (long)(T - n - 1) * V, V, request.continuation_ids);
}

class ScoreRequestsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ScoreRequestsTest, SharedAndSeparateForwardsMatchAFullForward) {
  auto model = model_load(kFixtures + GetParam());
  ASSERT_TRUE(model.ok()) << model.error();
  // Two one-token answers after one context (one shared forward), a longer continuation, and a
  // request whose input is not a prefix of the others.
  std::vector<TokenizedRequest> requests = {
      {{0, 17, 230, 4001}, {12}},
      {{0, 17, 230, 4001}, {99}},
      {{0, 17, 230, 4001}, {12, 999, 5}},
      {{0, 40, 41}, {7, 8}},
  };
  auto scored = loglikelihood_score_requests(**model, requests, 4096);
  ASSERT_TRUE(scored.ok()) << scored.error();
  for (size_t r = 0; r < requests.size(); ++r) {
    LoglikelihoodResult expected = reference_score(**model, requests[r]);
    EXPECT_NEAR((*scored)[r].ll, expected.ll, 1e-4) << "request " << r;
    EXPECT_EQ((*scored)[r].is_greedy, expected.is_greedy) << "request " << r;
    EXPECT_TRUE(std::isfinite((*scored)[r].ll));
  }
  // Left truncation as lm-eval: with max_length 3 the model reads (ctx + cont)[-4:][:-1].
  auto truncated = loglikelihood_score_requests(**model, {{{0, 17, 230, 4001}, {12, 999}}}, 3);
  ASSERT_TRUE(truncated.ok()) << truncated.error();
  EXPECT_NEAR((*truncated)[0].ll, reference_score(**model, {{230, 4001}, {12, 999}}).ll, 1e-4);
  // A continuation longer than the model's positions is an error.
  EXPECT_FALSE(loglikelihood_score_requests(**model, {{{0}, {1, 2, 3, 4}}}, 3).ok());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ScoreRequestsTest,
                         ::testing::Values("random-llama", "random-qwen2", "random-qwen3"));

}  // namespace
}  // namespace golinear::eval
