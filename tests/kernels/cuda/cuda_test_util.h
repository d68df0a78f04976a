// Scaffolding shared by the GPU tests (tests/kernels/cuda and tests/<module>/cuda): skipping
// without a GPU, status assertions, random inputs, the bf16 round trip, device arrays with
// poisoned guards on both sides, and comparison against the CPU reference (normalized MSE, max-abs error,
// NaN/Inf). Header-only; the CPU-side measures (all_finite, nmse, ...) come from
// kernels/kernel_test_util.h, included here by a relative path so that every build finds it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "../kernel_test_util.h"

// Skips the test when no CUDA device is present (CI without a GPU runs `ctest -LE gpu`).
#define REQUIRE_GPU() \
  if (!::golinear::kernels::test::has_gpu()) GTEST_SKIP() << "no CUDA device"

// Asserts that a Status or Result is ok, printing its error otherwise.
#define ASSERT_OK(expr)                                 \
  do {                                                  \
    const auto& gl_status_ = (expr);                    \
    ASSERT_TRUE(gl_status_.ok()) << gl_status_.error(); \
  } while (0)

namespace golinear::kernels::test {

inline bool has_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// n values uniform in [lo, hi), deterministic in seed.
inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 e(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(e);
  return v;
}

// The bf16 round trip: what a value becomes when the GPU stores it in bf16.
inline float bf16_round(float x) { return __bfloat162float(__float2bfloat16(x)); }
inline void round_bf16(std::vector<float>& v) {
  for (auto& x : v) x = bf16_round(x);
}
inline std::vector<__nv_bfloat16> to_bf16(const std::vector<float>& v) {
  std::vector<__nv_bfloat16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = __float2bfloat16(v[i]);
  return out;
}
// n bf16 values of device memory d, as floats.
inline std::vector<float> bf16_to_float(const __nv_bfloat16* d, size_t n) {
  std::vector<__nv_bfloat16> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = __bfloat162float(h[i]);
  return out;
}

// Rows of D scaled to unit length (as the linear branch's q̂, k̂), sums in double.
inline void unit_rows(std::vector<float>& v, int D) {
  for (size_t r = 0; r < v.size() / D; ++r) {
    double s = 0;
    for (int d = 0; d < D; ++d) s += (double)v[r * D + d] * v[r * D + d];
    const float inv = 1.0f / std::sqrt((float)s + 1e-6f);
    for (int d = 0; d < D; ++d) v[r * D + d] *= inv;
  }
}
// (N, G, D) → (N, H, D), query head h reading kv head h / (H / G); Out is float or double.
template <class Out = float>
std::vector<Out> expand_heads(const std::vector<float>& x, int N, int H, int G, int D) {
  std::vector<Out> out((size_t)N * H * D);
  for (int n = 0; n < N; ++n)
    for (int h = 0; h < H; ++h)
      for (int d = 0; d < D; ++d)
        out[((size_t)n * H + h) * D + d] = x[((size_t)n * G + h / (H / G)) * D + d];
  return out;
}
// (N, H, D) → (N, G, D): the sum over the query heads of each kv head, accumulated in S.
template <class S>
std::vector<float> sum_heads(const std::vector<S>& x, int N, int H, int G, int D) {
  std::vector<S> acc((size_t)N * G * D, S(0));
  for (int n = 0; n < N; ++n)
    for (int h = 0; h < H; ++h)
      for (int d = 0; d < D; ++d)
        acc[((size_t)n * G + h / (H / G)) * D + d] += x[((size_t)n * H + h) * D + d];
  return std::vector<float>(acc.begin(), acc.end());
}

constexpr size_t kGuard = 256;  // poisoned elements before and after each device array

// A device array of n elements of T (float, bf16, double, int32) with kGuard guard elements on
// each side; all bytes start as 0xFF (NaN in bf16 and fp32), so an unwritten element fails a
// finite check and a write outside [0, n) changes a guard (download() and guards_intact() check
// them).
template <class T>
struct Dev {
  T* ptr = nullptr;  // element 0 (the front guard lies before it)
  size_t n = 0;
  explicit Dev(size_t count) : n(count) {
    T* base = nullptr;
    EXPECT_EQ(cudaMalloc(&base, (n + 2 * kGuard) * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemset(base, 0xFF, (n + 2 * kGuard) * sizeof(T)), cudaSuccess);
    ptr = base ? base + kGuard : nullptr;
  }
  // n = values.size(), uploaded.
  explicit Dev(const std::vector<float>& values) : Dev(values.size()) { upload(values); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  ~Dev() {
    if (ptr) cudaFree(ptr - kGuard);
  }
  void upload(const std::vector<float>& v) {
    EXPECT_LE(v.size(), n) << "upload past the end";
    const std::vector<T> h = from_float_vec(v);
    EXPECT_EQ(cudaMemcpy(ptr, h.data(), std::min(h.size(), n) * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  // Whether both guards still hold their 0xFF bytes (synchronizes the device first).
  bool guards_intact() const {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<unsigned char> front(kGuard * sizeof(T)), back(kGuard * sizeof(T));
    EXPECT_EQ(cudaMemcpy(front.data(), ptr - kGuard, front.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(back.data(), ptr + n, back.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    auto poisoned = [](const std::vector<unsigned char>& b) {
      return std::all_of(b.begin(), b.end(), [](unsigned char x) { return x == 0xFF; });
    };
    return poisoned(front) && poisoned(back);
  }
  // The n values, after checking that the guards are intact.
  std::vector<float> download() const {
    EXPECT_TRUE(guards_intact()) << "guard overwritten";
    std::vector<T> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = to_float(h[i]);
    return out;
  }
  // The n values' bytes (bitwise comparisons).
  std::vector<unsigned char> raw() const {
    std::vector<unsigned char> h(n * sizeof(T));
    EXPECT_EQ(cudaMemcpy(h.data(), ptr, h.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
  static std::vector<T> from_float_vec(const std::vector<float>& v) {
    std::vector<T> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = from_float(v[i]);
    return h;
  }
  static T from_float(float x) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16(x);
    else return (T)x;
  }
  static float to_float(T x) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(x);
    else return (float)x;
  }
};
using DevB = Dev<__nv_bfloat16>;
using DevF = Dev<float>;

// got against the reference want, in double: err = Σ(got − want)², ref = Σwant²,
// nmse = err / max(ref, 1e-30), max_abs = max |got − want|.
struct Comparison {
  double nmse = 0, max_abs = 0, err = 0, ref = 0;
};
inline Comparison compare(const float* got, const float* want, size_t n) {
  Comparison c;
  for (size_t i = 0; i < n; ++i) {
    const double d = (double)got[i] - want[i];
    c.err += d * d;
    c.ref += (double)want[i] * want[i];
    c.max_abs = std::max(c.max_abs, std::abs(d));
  }
  c.nmse = c.err / std::max(c.ref, 1e-30);
  return c;
}
inline Comparison compare(const std::vector<float>& got, const std::vector<float>& want) {
  return compare(got.data(), want.data(), want.size());
}

inline size_t count_nonfinite(const std::vector<float>& v) {
  size_t bad = 0;
  for (float x : v) bad += !std::isfinite(x);
  return bad;
}

// Same size, every element finite (stops at the first that is not), NMSE below nmse_tol; prints
// the NMSE and max-abs error.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                         double nmse_tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_TRUE(std::isfinite(got[i])) << what << " element " << i << " not finite";
  const Comparison e = compare(got, want);
  EXPECT_LT(e.nmse, nmse_tol) << what << ": nmse " << e.nmse << " max abs " << e.max_abs;
  std::printf("  %-28s nmse %.3e  max abs %.3e\n", what, e.nmse, e.max_abs);
}

}  // namespace golinear::kernels::test
