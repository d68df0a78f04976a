#include "eval/scoring.h"

#include <cctype>
#include <cmath>
#include <limits>

#include "eval/synthetic_random.h"

namespace golinear::eval {

int argmax_first(const std::vector<double>& values) {
  int best = 0;
  for (int i = 1; i < (int)values.size(); ++i)
    if (values[i] > values[best]) best = i;
  return best;
}

MultipleChoiceScore score_multiple_choice(const std::vector<double>& lls,
                                          const std::vector<long>& choice_lengths, int label) {
  std::vector<double> normalized(lls.size());
  for (size_t i = 0; i < lls.size(); ++i) normalized[i] = lls[i] / (double)choice_lengths[i];
  MultipleChoiceScore score;
  score.pred = argmax_first(lls);
  score.pred_norm = argmax_first(normalized);
  score.acc = score.pred == label ? 1.0 : 0.0;
  score.acc_norm = score.pred_norm == label ? 1.0 : 0.0;
  return score;
}

long utf8_length(const std::string& text) {
  long n = 0;
  for (unsigned char c : text)
    if ((c & 0xC0) != 0x80) ++n;  // every byte that is not a continuation byte starts a character
  return n;
}

double mean_of(const std::vector<double>& values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0;
  for (double v : values) sum += v;
  return sum / (double)values.size();
}

double mean_stderr(const std::vector<double>& values) {
  const size_t n = values.size();
  if (n < 2) return std::numeric_limits<double>::quiet_NaN();
  const double mean = mean_of(values);
  double squares = 0;
  for (double v : values) squares += (v - mean) * (v - mean);
  return std::sqrt(squares / (double)(n - 1)) / std::sqrt((double)n);
}

double pooled_sample_stderr(const std::vector<double>& stderrs, const std::vector<long>& sizes) {
  double numerator = 0;
  long total = 0;
  for (size_t i = 0; i < stderrs.size(); ++i) {
    numerator += (double)(sizes[i] - 1) * stderrs[i] * stderrs[i] * (double)sizes[i];
    total += sizes[i];
  }
  const long dof = total - (long)stderrs.size();
  if (dof <= 0 || total == 0) return std::numeric_limits<double>::quiet_NaN();
  return std::sqrt(numerator / (double)dof / (double)total);
}

double lambada_perplexity(const std::vector<double>& target_lls) {
  return std::exp(-mean_of(target_lls));
}

double lambada_perplexity_stderr(const std::vector<double>& target_lls, int iterations,
                                 uint64_t seed) {
  const size_t n = target_lls.size();
  if (n < 2 || iterations < 2) return std::numeric_limits<double>::quiet_NaN();
  SyntheticRandom random(seed);
  std::vector<double> resampled(iterations);
  for (int it = 0; it < iterations; ++it) {
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += target_lls[random.uniform_index(n)];
    resampled[it] = std::exp(-sum / (double)n);
  }
  return mean_stderr(resampled) * std::sqrt((double)iterations);  // the sample std itself
}

namespace {

std::string ascii_lower(const std::string& text) {
  std::string out = text;
  for (char& c : out) c = (char)std::tolower((unsigned char)c);
  return out;
}

}  // namespace

double string_match_all(const std::string& prediction,
                        const std::vector<std::string>& references) {
  if (references.empty()) return 0;
  const std::string lowered = ascii_lower(prediction);
  int found = 0;
  for (const std::string& reference : references)
    if (lowered.find(ascii_lower(reference)) != std::string::npos) ++found;
  return 100.0 * found / (double)references.size();
}

std::string ruler_postprocess_prediction(const std::string& prediction) {
  std::string out = prediction;
  for (char& c : out)
    if ((unsigned char)c < 0x20) c = '\n';
  const char* space = " \t\n\r\v\f";
  const size_t begin = out.find_first_not_of(space);
  if (begin == std::string::npos) return "";
  const size_t end = out.find_last_not_of(space);
  return out.substr(begin, end - begin + 1);
}

}  // namespace golinear::eval
