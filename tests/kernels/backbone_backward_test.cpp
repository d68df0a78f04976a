// Finite-difference checks of the backbone backwards that end-to-end distillation runs through
// (linear, RMSNorm, SwiGLU, RoPE, softmax attention), and the BLAS linear against its plain
// reference. The kernels are fp32: central differences with h = 1e-2 on loss = Σ r·out with a
// fixed random r; agreement within 1% of the gradient scale (observed ~1e-4 relative).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"

namespace golinear::kernels::cpu {
namespace {

std::vector<float> random_vector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Checks d(Σ r·f(x))/dx against `analytic` for every entry of x.
void expect_gradient(std::vector<float>& x, const std::function<std::vector<float>()>& f,
                     const std::vector<float>& r, const std::vector<float>& analytic,
                     const std::string& what) {
  auto loss = [&] {
    std::vector<float> out = f();
    double s = 0;
    for (size_t i = 0; i < out.size(); ++i) s += (double)r[i] * out[i];
    return s;
  };
  double scale = 0;
  std::vector<double> fd(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float saved = x[i], h = 1e-2f;
    x[i] = saved + h;
    const double up = loss();
    x[i] = saved - h;
    const double down = loss();
    x[i] = saved;
    fd[i] = (up - down) / (2 * h);
    scale = std::max(scale, std::fabs(fd[i]));
  }
  ASSERT_GT(scale, 0.0) << what;
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(analytic[i], fd[i], 0.01 * scale) << what << "[" << i << "]";
}

TEST(BackboneBackward, LinearMatchesReferenceAndFiniteDifferences) {
  const int T = 5, K = 7, N = 6;
  auto x = random_vector(T * K, 1), w = random_vector(N * K, 2), b = random_vector(N, 3);
  std::vector<float> fast(T * N), ref(T * N);
  linear_forward(fast.data(), x.data(), w.data(), b.data(), T, K, N);
  linear_forward_reference(ref.data(), x.data(), w.data(), b.data(), T, K, N);
  for (int i = 0; i < T * N; ++i) EXPECT_NEAR(fast[i], ref[i], 1e-5);
  auto r = random_vector(T * N, 4);
  std::vector<float> dx(T * K, 0), dw(N * K, 0), db(N, 0);
  linear_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), T, K, N);
  auto f = [&] {
    std::vector<float> out(T * N);
    linear_forward(out.data(), x.data(), w.data(), b.data(), T, K, N);
    return out;
  };
  expect_gradient(x, f, r, dx, "dx");
  expect_gradient(w, f, r, dw, "dw");
  expect_gradient(b, f, r, db, "dbias");
}

TEST(BackboneBackward, FewRowLinearMatchesReference) {
  for (int T : {1, 3}) {
    const int K = 37, N = 19;  // K not a multiple of 8: the tail loop runs
    auto x = random_vector(T * K, 21), w = random_vector(N * K, 22), b = random_vector(N, 23);
    std::vector<float> fast(T * N), ref(T * N);
    linear_forward(fast.data(), x.data(), w.data(), b.data(), T, K, N);
    linear_forward_reference(ref.data(), x.data(), w.data(), b.data(), T, K, N);
    for (int i = 0; i < T * N; ++i) EXPECT_NEAR(fast[i], ref[i], 1e-5) << "T=" << T;
  }
}

TEST(BackboneBackward, RmsNormMatchesFiniteDifferences) {
  const int N = 3, C = 8;
  auto x = random_vector(N * C, 5), w = random_vector(C, 6), r = random_vector(N * C, 7);
  std::vector<float> dx(N * C, 0), dw(C, 0);
  rmsnorm_backward(dx.data(), dw.data(), r.data(), x.data(), w.data(), N, C, 1e-5f);
  auto f = [&] {
    std::vector<float> out(N * C);
    rmsnorm_forward(out.data(), x.data(), w.data(), N, C, 1e-5f);
    return out;
  };
  expect_gradient(x, f, r, dx, "dx");
  expect_gradient(w, f, r, dw, "dw");
}

TEST(BackboneBackward, SwiGluMatchesFiniteDifferences) {
  const int N = 12;
  auto gate = random_vector(N, 8, 3.0f), up = random_vector(N, 9), r = random_vector(N, 10);
  std::vector<float> dgate(N, 0), dup(N, 0);
  swiglu_backward(dgate.data(), dup.data(), r.data(), gate.data(), up.data(), N);
  auto f = [&] {
    std::vector<float> out(N);
    swiglu_forward(out.data(), gate.data(), up.data(), N);
    return out;
  };
  expect_gradient(gate, f, r, dgate, "dgate");
  expect_gradient(up, f, r, dup, "dup");
}

TEST(BackboneBackward, RopeMatchesFiniteDifferences) {
  const int T = 4, N = 2, D = 8;
  auto x = random_vector(T * N * D, 11), r = random_vector(T * N * D, 12);
  std::vector<float> inv_freq = {1.0f, 0.3f, 0.1f, 0.01f};
  std::vector<float> dx = r;
  rope_backward(dx.data(), inv_freq.data(), T, N, D, 3);
  auto f = [&] {
    std::vector<float> out = x;
    rope_forward(out.data(), inv_freq.data(), T, N, D, 3);
    return out;
  };
  expect_gradient(x, f, r, dx, "dx");
}

TEST(BackboneBackward, AttentionMatchesFiniteDifferences) {
  const int T = 7, H = 4, G = 2, D = 4;
  for (AttentionMask mask : {AttentionMask{}, AttentionMask{2, 3}}) {
    auto q = random_vector(T * H * D, 13), k = random_vector(T * G * D, 14),
         v = random_vector(T * G * D, 15), r = random_vector(T * H * D, 16);
    std::vector<float> dq(q.size(), 0), dk(k.size(), 0), dv(v.size(), 0);
    attention_backward(dq.data(), dk.data(), dv.data(), r.data(), q.data(), k.data(), v.data(), T,
                       H, G, D, mask);
    auto f = [&] {
      std::vector<float> out(T * H * D);
      attention_forward(out.data(), q.data(), k.data(), v.data(), T, T, 0, H, G, D, mask);
      return out;
    };
    expect_gradient(q, f, r, dq, "dq");
    expect_gradient(k, f, r, dk, "dk");
    expect_gradient(v, f, r, dv, "dv");
  }
}

}  // namespace
}  // namespace golinear::kernels::cpu
