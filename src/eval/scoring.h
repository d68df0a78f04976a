// The scoring rules of lm-evaluation-harness and RULER as pure functions of numbers and strings
// (docs: ../shared/docs/EVAL.md). Everything that touches a model lives elsewhere
// (eval/loglikelihood.h, eval/generation.h); these functions are what the tests check by hand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace golinear::eval {

// One multiple-choice question scored from the summed log-likelihood of each choice.
struct MultipleChoiceScore {
  int pred = 0;        // argmax ll, first index on ties
  int pred_norm = 0;   // argmax ll / choice_length, first index on ties
  double acc = 0;      // 1 when pred == label
  double acc_norm = 0; // 1 when pred_norm == label
};

// lls (N): summed continuation log-likelihood of each choice; choice_lengths (N): character
// count (Unicode code points, as Python's len) of each choice text without the leading space.
MultipleChoiceScore score_multiple_choice(const std::vector<double>& lls,
                                          const std::vector<long>& choice_lengths, int label);

// Index of the largest value, the first one on ties (numpy.argmax).
int argmax_first(const std::vector<double>& values);

// Number of Unicode code points of UTF-8 text (Python's len of the decoded string).
long utf8_length(const std::string& text);

// Mean of `values`.
double mean_of(const std::vector<double>& values);

// lm-eval's mean_stderr: sample standard deviation (n − 1) / sqrt(n). NaN ("N/A") when n < 2.
double mean_stderr(const std::vector<double>& values);

// lm-eval's pooled_sample_stderr: the stderr of the question-weighted mean of groups with
// standard errors `stderrs` and sizes `sizes` (as if every item were pooled into one list).
double pooled_sample_stderr(const std::vector<double>& stderrs, const std::vector<long>& sizes);

// LAMBADA perplexity: exp(−mean over documents of the target's summed log-likelihood).
double lambada_perplexity(const std::vector<double>& target_lls);

// Standard error of lambada_perplexity by bootstrap, as lm-eval computes it for perplexity
// (resampling documents with replacement `iterations` times; sample std (n − 1) of the
// resampled perplexities). Deterministic from `seed`; lm-eval's own value differs by
// resampling noise only. NaN when fewer than 2 documents.
double lambada_perplexity_stderr(const std::vector<double>& target_lls, int iterations = 100000,
                                 uint64_t seed = 1234);

// RULER's string_match_all for one sample: the fraction of `references` found in `prediction`
// as case-insensitive substrings, × 100. The mean over samples is the task score.
double string_match_all(const std::string& prediction, const std::vector<std::string>& references);

// RULER's postprocess_pred: control characters (U+0000..U+001F) become "\n", then strip.
std::string ruler_postprocess_prediction(const std::string& prediction);

}  // namespace golinear::eval
