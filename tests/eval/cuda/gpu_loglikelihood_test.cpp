// The log-likelihood tasks' scoring with the GPU forward (eval/cuda/gpu_rows.h) against the CPU
// model's (eval/loglikelihood.h), on a random head_dim-64 model, softmax and linearized: the same
// requests (multiple choice with a shared context, contexts that differ, one-token answers, a
// left-truncated input) give the same log-likelihoods within 0.1 per continuation token (bf16:
// the logits' error on this model is ~0.01–0.03 rms, so a token's log-prob moves by a few
// hundredths; reading a wrong row moves it by ~1), and the same is_greedy on a continuation that
// is the CPU's greedy one wherever its top-two logits are 0.2 apart or more.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "eval/cuda/gpu_rows.h"
#include "eval/loglikelihood.h"
#include "kernels/cuda/cuda_test_util.h"
#include "model/cuda/gpu_model.h"
#include "model/cuda/random_models.h"

namespace golinear {
namespace {

using eval::TokenizedRequest;

std::vector<int32_t> ids_of(int n, int V, uint64_t seed) { return test::test_tokens(n, V, seed); }

// The CPU's greedy continuation of `context` (n tokens) and whether each of its rows has a clear
// winner (top two logits ≥ 0.2 apart).
std::vector<int32_t> greedy_continuation(const Model& m, const std::vector<int32_t>& context, int n,
                                         bool* clear) {
  const int V = m.config.vocab_size;
  SequenceCache cache = model_new_cache(m);
  std::vector<float> logits(V);
  model_forward_cached(m, cache, context.data(), (int)context.size(), logits.data(), true);
  std::vector<int32_t> out;
  *clear = true;
  for (int i = 0; i < n; ++i) {
    std::vector<float> sorted = logits;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    *clear = *clear && sorted[0] - sorted[1] >= 0.2f;
    const int32_t next = test::argmax_of(logits.data(), V);
    out.push_back(next);
    model_forward_cached(m, cache, &next, 1, logits.data(), true);
  }
  return out;
}

void check_model(const Model& cpu, const char* what) {
  const int V = cpu.config.vocab_size;
  auto gpu = golinear::model::cuda::gpu_model_upload(cpu);
  ASSERT_TRUE(gpu.ok()) << gpu.error();
  const eval::RowsForward rows = golinear::eval::cuda::gpu_rows_forward(**gpu);

  std::vector<std::vector<TokenizedRequest>> docs;
  // Multiple choice: one context of 40 tokens, four continuations of 1–4 tokens.
  const std::vector<int32_t> context = ids_of(40, V, 1);
  std::vector<TokenizedRequest> choices;
  for (int c = 0; c < 4; ++c) choices.push_back({context, ids_of(c + 1, V, 10 + c)});
  docs.push_back(choices);
  // One-token answers after one context (MMLU-like: the inputs are prefixes of each other).
  std::vector<TokenizedRequest> letters;
  for (int c = 0; c < 4; ++c) letters.push_back({ids_of(30, V, 2), {(int32_t)(100 + c)}});
  docs.push_back(letters);
  // Contexts that differ, one continuation (winogrande-like).
  docs.push_back({{ids_of(25, V, 3), ids_of(5, V, 30)}, {ids_of(27, V, 4), ids_of(5, V, 30)}});
  // The CPU's own greedy continuation (is_greedy true on the CPU).
  bool clear = false;
  const std::vector<int32_t> lambada_context = ids_of(50, V, 5);
  docs.push_back({{lambada_context, greedy_continuation(cpu, lambada_context, 3, &clear)}});

  int requests = 0;
  double worst = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    auto want = eval::loglikelihood_score_requests(cpu, docs[d], 4096);
    auto got = eval::loglikelihood_score_requests(rows, V, docs[d], 4096);
    ASSERT_TRUE(want.ok()) << want.error();
    ASSERT_TRUE(got.ok()) << got.error();
    ASSERT_EQ(got->size(), want->size());
    for (size_t r = 0; r < want->size(); ++r, ++requests) {
      const double n = (double)docs[d][r].continuation_ids.size();
      const double diff = std::abs((*got)[r].ll - (*want)[r].ll);
      worst = std::max(worst, diff / n);
      EXPECT_LT(diff, 0.1 * n) << what << " doc " << d << " request " << r << ": gpu "
                               << (*got)[r].ll << " cpu " << (*want)[r].ll;
      EXPECT_TRUE(std::isfinite((*got)[r].ll));
    }
  }
  auto greedy_cpu = eval::loglikelihood_score_requests(cpu, docs.back(), 4096);
  auto greedy_gpu = eval::loglikelihood_score_requests(rows, V, docs.back(), 4096);
  ASSERT_TRUE(greedy_cpu.ok() && greedy_gpu.ok());
  EXPECT_TRUE((*greedy_cpu)[0].is_greedy) << what;
  if (clear) {
    EXPECT_TRUE((*greedy_gpu)[0].is_greedy) << what;
  }

  // Left truncation (max_length 24 < the 40-token context): the same cut on both devices.
  auto want = eval::loglikelihood_score_requests(cpu, docs[0], 24);
  auto got = eval::loglikelihood_score_requests(rows, V, docs[0], 24);
  ASSERT_TRUE(want.ok() && got.ok());
  for (size_t r = 0; r < want->size(); ++r) {
    const double n = (double)docs[0][r].continuation_ids.size();
    EXPECT_LT(std::abs((*got)[r].ll - (*want)[r].ll), 0.1 * n) << what << " truncated request " << r;
  }
  // A continuation longer than max_length is the same error on both.
  EXPECT_FALSE(eval::loglikelihood_score_requests(rows, V, {{{0}, {1, 2, 3, 4}}}, 3).ok());
  // Every document's groups packed into one forward (GpuForwardOptions::sequences and
  // logit_rows) against one forward per group: the mixers see the same sequences, only the
  // products' row counts differ (cuBLAS may pick other kernels), so the results agree to bf16
  // rounding, far below the ~1 of a row read from the wrong sequence or position.
  auto packed = eval::loglikelihood_score_documents(rows, V, docs, 4096);
  ASSERT_TRUE(packed.ok()) << packed.error();
  double worst_packed = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    auto alone = eval::loglikelihood_score_requests(rows, V, docs[d], 4096);
    ASSERT_TRUE(alone.ok()) << alone.error();
    for (size_t r = 0; r < docs[d].size(); ++r) {
      const double n = (double)docs[d][r].continuation_ids.size();
      const double diff = std::abs((*packed)[d][r].ll - (*alone)[r].ll);
      worst_packed = std::max(worst_packed, diff / n);
      EXPECT_LT(diff, 0.05 * n) << what << " packed doc " << d << " request " << r;
    }
  }
  std::printf("  %-8s %d requests: worst |Δll| per continuation token %.3e (packed against alone "
              "%.3e), greedy rows clear %d\n",
              what, requests, worst, worst_packed, (int)clear);
}

TEST(GpuLoglikelihood, SoftmaxMatchesCpu) {
  REQUIRE_GPU();
  auto cpu = test::random_model(test::small_llama_config(), 31);
  check_model(*cpu, "softmax");
}

TEST(GpuLoglikelihood, MixedMatchesCpu) {
  REQUIRE_GPU();
  auto cpu = test::random_model(test::small_llama_config(), 32);
  cpu->mixers = test::linearized_stack(*cpu, {0}, 7);
  check_model(*cpu, "mixed");
}

}  // namespace
}  // namespace golinear
