// Helpers shared by the kernel tests: deterministic random tensors and error measures.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace golinear::kernels::test {

template <class S = float>
std::vector<S> random_vector(size_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 engine(seed);
  std::vector<S> v(n);
  for (auto& x : v) x = (S)(lo + (hi - lo) * ((engine() >> 11) * 0x1.0p-53));
  return v;
}

// Rows of D made unit length (as the linear branch's q̂, k̂).
template <class S>
void normalize_rows(std::vector<S>& v, int D) {
  for (size_t r = 0; r < v.size() / D; ++r) {
    S n = 0;
    for (int d = 0; d < D; ++d) n += v[r * D + d] * v[r * D + d];
    n = std::sqrt(n);
    for (int d = 0; d < D; ++d) v[r * D + d] /= n;
  }
}

// Normalized MSE of a against the reference b: Σ(a − b)² / Σb².
template <class A, class B>
double nmse(const A& a, const B& b) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = (double)a[i] - (double)b[i];
    err += d * d;
    ref += (double)b[i] * b[i];
  }
  return err / std::max(ref, 1e-30);
}

template <class A, class B>
double max_abs_diff(const A& a, const B& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs((double)a[i] - (double)b[i]));
  return m;
}

template <class A>
double max_abs(const A& a) {
  double m = 0;
  for (auto x : a) m = std::max(m, std::abs((double)x));
  return m;
}

template <class A>
bool all_finite(const A& a) {
  return std::all_of(a.begin(), a.end(), [](auto x) { return std::isfinite((double)x); });
}

// Central-difference check of a scalar function of `x` against its analytic gradient, in fp64:
// |analytic − numeric| ≤ atol + rtol·max(|analytic|, |numeric|) for every element; returns the
// worst violation ratio (≤ 1 passes).
template <class Loss>
double finite_difference_ratio(std::vector<double>& x, const std::vector<double>& analytic,
                               Loss loss, double eps = 1e-6, double atol = 1e-7,
                               double rtol = 1e-5) {
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + eps;
    const double up = loss();
    x[i] = saved - eps;
    const double down = loss();
    x[i] = saved;
    const double numeric = (up - down) / (2 * eps);
    const double tol = atol + rtol * std::max(std::abs(numeric), std::abs(analytic[i]));
    worst = std::max(worst, std::abs(numeric - analytic[i]) / tol);
  }
  return worst;
}

template <class S>
double dot_all(const std::vector<S>& a, const std::vector<S>& b) {
  double acc = 0;
  for (size_t i = 0; i < a.size(); ++i) acc += (double)a[i] * b[i];
  return acc;
}

}  // namespace golinear::kernels::test
