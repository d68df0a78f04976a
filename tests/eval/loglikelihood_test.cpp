// The tokenization split of lm-eval's _encode_pair and the scoring of continuations: by hand on
// tiny logits, and against a plain full forward on the random-weight fixtures.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "eval/loglikelihood.h"
#include "model/linearization.h"

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

// The shared-prefix path (one context forward, a cache clone per choice) against the reference
// path (a forward per choice): bit-identical for the choices of one context; contexts that only
// begin alike and left truncation fall back to the reference (bit-identical too).
void expect_sharing_matches_reference(const Model& model, const std::vector<TokenizedRequest>& requests,
                                      int max_length) {
  auto shared = loglikelihood_score_requests(model, requests, max_length, /*share_prefix=*/true);
  auto reference = loglikelihood_score_requests(model, requests, max_length, /*share_prefix=*/false);
  ASSERT_TRUE(shared.ok()) << shared.error();
  ASSERT_TRUE(reference.ok()) << reference.error();
  for (size_t r = 0; r < requests.size(); ++r) {
    EXPECT_EQ((*shared)[r].ll, (*reference)[r].ll) << "request " << r;
    EXPECT_EQ((*shared)[r].is_greedy, (*reference)[r].is_greedy) << "request " << r;
    LoglikelihoodResult full = reference_score(model, requests[r]);
    if (max_length >= 4096) {
      EXPECT_NEAR((*shared)[r].ll, full.ll, 1e-4) << "request " << r;
    }
  }
}

// Multiple choice: one context, choices of different lengths (one a prefix of another, one a
// single token); winogrande-like: contexts that share a beginning and one continuation.
const std::vector<TokenizedRequest> kChoices = {
    {{0, 17, 230, 4001, 52, 9}, {12, 999, 5}},
    {{0, 17, 230, 4001, 52, 9}, {12, 999}},
    {{0, 17, 230, 4001, 52, 9}, {77}},
    {{0, 17, 230, 4001, 52, 9}, {3000, 4, 18, 640}},
};
const std::vector<TokenizedRequest> kPartialContexts = {
    {{0, 17, 230, 4001, 52}, {12, 999, 5}},
    {{0, 17, 230, 88, 1000, 2}, {12, 999, 5}},
    {{0, 17, 31}, {12, 999, 5}},
};

TEST_P(ScoreRequestsTest, SharedPrefixEqualsSeparateForwards) {
  auto model = model_load(kFixtures + GetParam());
  ASSERT_TRUE(model.ok()) << model.error();
  expect_sharing_matches_reference(**model, kChoices, 4096);
  expect_sharing_matches_reference(**model, kPartialContexts, 4096);
  expect_sharing_matches_reference(**model, kChoices, 6);  // truncated
}

// The same on a linearized model (hybrid GDN and GLA layers, one softmax layer kept).
TEST_P(ScoreRequestsTest, SharedPrefixEqualsSeparateForwardsLinearized) {
  auto model = model_load(kFixtures + GetParam());
  ASSERT_TRUE(model.ok()) << model.error();
  for (mixers::MixerKind kind : {mixers::MixerKind::gdn, mixers::MixerKind::gla}) {
    mixers::MixerOptions options;
    options.kind = kind, options.sinks = 1, options.window = 2;
    auto stack = linearized_mixers(**model, options, /*keep_full=*/{0}, 3);
    ASSERT_TRUE(stack.ok()) << stack.error();
    (*model)->mixers = std::move(*stack);
    expect_sharing_matches_reference(**model, kChoices, 4096);
    expect_sharing_matches_reference(**model, kPartialContexts, 4096);
  }
}

// Documents packed into passes (loglikelihood_score_documents) with the CPU rows forward: every
// request's result is the reference path's to the bit, whatever the pass limits (one group per
// pass, a few, all in one pass, an input larger than the limit); the passes the forward sees
// respect the limits; a bad document is named by its index.
TEST_P(ScoreRequestsTest, DocumentPassesEqualPerDocumentScoring) {
  auto model = model_load(kFixtures + GetParam());
  ASSERT_TRUE(model.ok()) << model.error();
  const int V = (*model)->config.vocab_size;
  const std::vector<std::vector<TokenizedRequest>> documents = {
      kChoices, kPartialContexts, {{{5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, {15}}}, kChoices};
  std::vector<std::vector<LoglikelihoodResult>> want;
  for (const auto& requests : documents) {
    auto scored = loglikelihood_score_requests(**model, requests, 4096, /*share_prefix=*/false);
    ASSERT_TRUE(scored.ok()) << scored.error();
    want.push_back(*scored);
  }
  const RowsForward cpu = cpu_rows_forward(**model);
  for (RowsPassLimits limits : {RowsPassLimits{1, 1}, RowsPassLimits{12, 4}, RowsPassLimits{}}) {
    std::vector<long> pass_tokens, pass_rows, pass_inputs;
    const RowsForward counted = [&](const std::vector<RowsInput>& inputs, float* rows) {
      long tokens = 0, n = 0;
      for (const RowsInput& in : inputs) tokens += in.T, n += in.T - in.first_row;
      pass_tokens.push_back(tokens);
      pass_rows.push_back(n);
      pass_inputs.push_back((long)inputs.size());
      return cpu(inputs, rows);
    };
    auto got = loglikelihood_score_documents(counted, V, documents, 4096, limits);
    ASSERT_TRUE(got.ok()) << got.error();
    ASSERT_EQ(got->size(), documents.size());
    for (size_t d = 0; d < documents.size(); ++d) {
      ASSERT_EQ((*got)[d].size(), documents[d].size());
      for (size_t r = 0; r < documents[d].size(); ++r) {
        EXPECT_EQ((*got)[d][r].ll, want[d][r].ll) << "document " << d << " request " << r;
        EXPECT_EQ((*got)[d][r].is_greedy, want[d][r].is_greedy) << "document " << d << " request " << r;
      }
    }
    for (size_t p = 0; p < pass_tokens.size(); ++p) {
      // Over a limit only as one input that alone exceeds it.
      if (pass_tokens[p] > limits.max_tokens || pass_rows[p] > limits.max_rows) {
        EXPECT_EQ(pass_inputs[p], 1) << "pass " << p;
      }
    }
    if (limits.max_tokens >= 16384) {
      EXPECT_EQ(pass_tokens.size(), 1u);  // everything in one pass
    } else {
      EXPECT_GT(pass_tokens.size(), documents.size());
    }
  }
  // A continuation longer than the positions: the error names the document.
  auto bad = loglikelihood_score_documents(cpu, V, {{{{0, 1}, {2}}}, {{{0}, {1, 2, 3, 4}}}}, 3, {}, 10);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("document 11"), std::string::npos) << bad.error();
}

// Wall time of one hellaswag-shaped document (a 96-token context, four 24-token endings) with
// and without prefix sharing on the bundled model, or on GOLINEAR_TIMING_MODEL (e.g. a
// linearized student). Run by hand: --gtest_also_run_disabled_tests.
TEST(ScoreRequestsTiming, DISABLED_SharedPrefixVersusSeparateForwards) {
  const char* dir = std::getenv("GOLINEAR_TIMING_MODEL");
  auto model = model_load(dir ? dir : std::string(GOLINEAR_MODEL_DIR) + "/tiny-llama3-25m");
  ASSERT_TRUE(model.ok()) << model.error();
  const int V = (*model)->config.vocab_size;
  std::vector<int32_t> context(96);
  for (int t = 0; t < 96; ++t) context[t] = (t * 7919 + 3) % V;
  std::vector<TokenizedRequest> requests;
  for (int c = 0; c < 4; ++c) {
    std::vector<int32_t> ending(24);
    for (int t = 0; t < 24; ++t) ending[t] = (t * 104729 + 31 * c + 11) % V;
    requests.push_back({context, ending});
  }
  for (bool share : {false, true, false, true}) {
    const auto start = std::chrono::steady_clock::now();
    constexpr int kRepeats = 5;
    for (int i = 0; i < kRepeats; ++i)
      ASSERT_TRUE(loglikelihood_score_requests(**model, requests, 4096, share).ok());
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("share_prefix=%d: %.1f ms per document\n", share, ms / kRepeats);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ScoreRequestsTest,
                         ::testing::Values("random-llama", "random-qwen2", "random-qwen3"));

}  // namespace
}  // namespace golinear::eval
