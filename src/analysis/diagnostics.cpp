#include "analysis/diagnostics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernels/cpu/linear.h"
#include "kernels/cpu/rope.h"

namespace golinear::analysis {

void unit_keys(float* k_hat, const float* k, int T, int G, int D) {
  for (long row = 0; row < (long)T * G; ++row) {
    const float* in = k + row * D;
    double norm2 = 0.0;
    for (int d = 0; d < D; ++d) norm2 += (double)in[d] * in[d];
    const double scale = 1.0 / std::sqrt(norm2 + kUnitNormEps);
    float* out = k_hat + row * D;
    for (int d = 0; d < D; ++d) out[d] = (float)(in[d] * scale);
  }
}

void key_concentration(float* concentration, const float* k_hat, int T, int G, int D) {
  std::vector<double> sum(D);
  for (int g = 0; g < G; ++g) {
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int t = 0; t < T; ++t) {
      const float* key = k_hat + ((long)t * G + g) * D;
      double norm2 = 0.0;
      for (int d = 0; d < D; ++d) {
        sum[d] += key[d];
        norm2 += sum[d] * sum[d];
      }
      concentration[(long)t * G + g] = (float)(std::sqrt(norm2) / (t + 1));
    }
  }
}

void projection_residual(float* residual, const float* k_hat, int T, int G, int D) {
  std::vector<double> sum(D), mean(D), deviation(D), missed(D);
  for (int g = 0; g < G; ++g) {
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int t = 0; t < T; ++t) {
      const float* key = k_hat + ((long)t * G + g) * D;
      double mean2 = 0.0, mean_dot_key = 0.0;
      for (int d = 0; d < D; ++d) {
        sum[d] += key[d];
        mean[d] = sum[d] / (t + 1);
        mean2 += mean[d] * mean[d];
        mean_dot_key += mean[d] * key[d];
      }
      // Π k̂ = (k̄·k̂ / ‖k̄‖²) k̄, or 0 without a mean direction.
      const double along = mean2 < 1e-24 ? 0.0 : mean_dot_key / mean2;
      double deviation2 = 0.0, missed2 = 0.0;
      for (int d = 0; d < D; ++d) {
        deviation[d] = key[d] - mean[d];                 // k̂ − k̄
        const double kept = key[d] - along * mean[d];    // (I − Π) k̂
        missed[d] = deviation[d] - kept;                 // (k̂ − k̄) − (I − Π) k̂
        deviation2 += deviation[d] * deviation[d];
        missed2 += missed[d] * missed[d];
      }
      const double deviation_norm = std::sqrt(deviation2);
      residual[(long)t * G + g] =
          deviation_norm < 1e-9 ? 0.0f : (float)(std::sqrt(missed2) / deviation_norm);
    }
  }
}

void attention_mass(float* sink_mass, float* far_mass, const float* q, const float* k,
                    const float* inv_freq, int T, int H, int G, int D, int sinks, int window) {
  std::vector<float> q_rope(q, q + (long)T * H * D), k_rope(k, k + (long)T * G * D);
  kernels::cpu::rope_forward(q_rope.data(), inv_freq, T, H, D, 0);
  kernels::cpu::rope_forward(k_rope.data(), inv_freq, T, G, D, 0);
  const int group = H / G;
  const double scale = 1.0 / std::sqrt((double)D);
  // One head at a time: scores (T, T) = q_h k_gᵀ through the BLAS-backed linear kernel (the
  // upper triangle is computed and ignored), then a causal softmax per row.
  std::vector<float> q_head((long)T * D), k_head((long)T * D), scores((long)T * T);
  for (int h = 0; h < H; ++h) {
    const int g = h / group;
    for (int t = 0; t < T; ++t) {
      std::copy_n(&q_rope[((long)t * H + h) * D], D, &q_head[(long)t * D]);
      std::copy_n(&k_rope[((long)t * G + g) * D], D, &k_head[(long)t * D]);
    }
    kernels::cpu::linear_forward(scores.data(), q_head.data(), k_head.data(), nullptr, T, D, T);
#pragma omp parallel for schedule(dynamic, 16)
    for (int t = 0; t < T; ++t) {
      const float* row = scores.data() + (long)t * T;
      double max_score = -std::numeric_limits<double>::infinity();
      for (int j = 0; j <= t; ++j) max_score = std::max(max_score, row[j] * scale);
      double total = 0.0, sink = 0.0, far = 0.0;
      for (int j = 0; j <= t; ++j) {
        const double p = std::exp(row[j] * scale - max_score);
        total += p;
        if (j < sinks) sink += p;
        else if (j <= t - window) far += p;
      }
      sink_mass[(long)t * H + h] = (float)(sink / total);
      if (far_mass) far_mass[(long)t * H + h] = (float)(far / total);
    }
  }
}

double nmse(const float* student, const float* teacher, long n) {
  double error = 0.0, reference = 0.0;
  for (long i = 0; i < n; ++i) {
    const double d = (double)student[i] - teacher[i];
    error += d * d;
    reference += (double)teacher[i] * teacher[i];
  }
  if (reference == 0.0) return error == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return error / reference;
}

void accumulate_squared_error(double* squared_error, double* reference, const float* student,
                              const float* teacher, long rows, long width) {
  for (long i = 0; i < rows; ++i) {
    const float* s = student + i * width;
    const float* t = teacher + i * width;
    double error = 0.0, ref = 0.0;
    for (long c = 0; c < width; ++c) {
      const double d = (double)s[c] - t[c];
      error += d * d;
      ref += (double)t[c] * t[c];
    }
    squared_error[i] += error;
    reference[i] += ref;
  }
}

std::vector<double> ranks_with_ties(const std::vector<double>& x) {
  const size_t n = x.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> ranks(n);
  for (size_t i = 0; i < n;) {
    size_t end = i + 1;
    while (end < n && x[order[end]] == x[order[i]]) ++end;
    const double mean_rank = (double)(i + 1 + end) / 2.0;  // mean of ranks i+1 .. end
    for (size_t k = i; k < end; ++k) ranks[order[k]] = mean_rank;
    i = end;
  }
  return ranks;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (a.size() != b.size() || a.size() < 2) return nan;
  const std::vector<double> ra = ranks_with_ties(a), rb = ranks_with_ties(b);
  const double n = (double)a.size();
  const double mean = (n + 1.0) / 2.0;  // the mean of any set of tie-averaged ranks 1..n
  double cov = 0.0, var_a = 0.0, var_b = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    cov += (ra[i] - mean) * (rb[i] - mean);
    var_a += (ra[i] - mean) * (ra[i] - mean);
    var_b += (rb[i] - mean) * (rb[i] - mean);
  }
  if (var_a == 0.0 || var_b == 0.0) return nan;
  return cov / std::sqrt(var_a * var_b);
}

std::vector<double> rank_normalize(const std::vector<double>& x) {
  if (x.size() == 1) return {0.5};
  std::vector<double> ranks = ranks_with_ties(x);
  for (double& r : ranks) r = (r - 1.0) / (double)(x.size() - 1);
  return ranks;
}

std::vector<double> layer_hardness(const std::vector<double>& concentration,
                                   const std::vector<double>& residual,
                                   const std::vector<double>& nmse) {
  std::vector<double> low_concentration(concentration.size());
  for (size_t l = 0; l < concentration.size(); ++l) low_concentration[l] = -concentration[l];
  std::vector<std::vector<double>> terms = {rank_normalize(low_concentration),
                                            rank_normalize(residual)};
  if (!nmse.empty()) terms.push_back(rank_normalize(nmse));
  std::vector<double> hardness(concentration.size(), 0.0);
  for (const auto& term : terms)
    for (size_t l = 0; l < hardness.size(); ++l) hardness[l] += term[l] / (double)terms.size();
  return hardness;
}

Result<std::vector<int>> select_full_layers(const std::vector<double>& hardness, int K,
                                            const std::string& method) {
  const int L = (int)hardness.size();
  if (K < 0 || K > L)
    return make_error("select full layers: K = ", K, " must be in [0, ", L, "] (the model has ", L,
                      " layers)");
  std::vector<int> layers;
  if (method == "hard") {
    for (int l = 0; l < L; ++l)
      if (std::isnan(hardness[l])) return make_error("select full layers: hardness of layer ", l, " is NaN");
    std::vector<int> order(L);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return hardness[a] > hardness[b]; });
    layers.assign(order.begin(), order.begin() + K);
  } else if (method == "uniform") {
    for (int i = 0; i < K; ++i) layers.push_back((int)std::floor((i + 0.5) * L / K));
  } else {
    return make_error("select full layers: unknown method '", method, "' (hard, uniform)");
  }
  std::sort(layers.begin(), layers.end());
  return layers;
}

}  // namespace golinear::analysis
