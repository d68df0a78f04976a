// The GPU hybrid mixer against the CPU mixer (mixers/hybrid_mixer): normalized MSE and
// max-abs error, NaN/Inf checks, and guard values after every output (outputs are poisoned with
// 0xFF bytes — NaN in bf16 and fp32 — so an unwritten element fails the finite check and a write
// past the end changes a guard). Label `gpu`: CI (no GPU) skips them with `ctest -LE gpu`.
//
// Tolerances: inputs are bf16-rounded before the CPU runs, so differences come from bf16 storage
// of outputs and intermediates (W, U, P, the bf16 copy of the state in the chunked form; P in
// attention): relative 2^-8 per value, i.e. NMSE ~1e-5 per rounding; chained roundings through
// 64-token chunks give up to ~1e-3. Thresholds below are 5e-3 (forward) and 2e-2 (backward, which
// reads fp32 checkpoints made by the bf16 forward).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/hybrid.h"
#include "mixers/hybrid_mixer.h"

namespace golinear::kernels::cuda {
namespace {

constexpr size_t kGuard = 256;  // poisoned elements after each output

bool has_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}
#define REQUIRE_GPU() \
  if (!has_gpu()) GTEST_SKIP() << "no CUDA device"

#define ASSERT_OK(expr)                          \
  do {                                           \
    auto gl_status_ = (expr);                    \
    ASSERT_TRUE(gl_status_.ok()) << gl_status_.error(); \
  } while (0)

std::vector<float> random_floats(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 e(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(e);
  return v;
}
void round_bf16(std::vector<float>& v) {
  for (auto& x : v) x = __bfloat162float(__float2bfloat16(x));
}
[[maybe_unused]] void unit_rows(std::vector<float>& v, int D) {
  for (size_t r = 0; r < v.size() / D; ++r) {
    double s = 0;
    for (int d = 0; d < D; ++d) s += (double)v[r * D + d] * v[r * D + d];
    const float inv = 1.0f / std::sqrt((float)s + 1e-6f);
    for (int d = 0; d < D; ++d) v[r * D + d] *= inv;
  }
}
// (N, G, D) → (N, H, D), query head h reading kv head h / (H / G).
[[maybe_unused]] std::vector<float> expand_heads(const std::vector<float>& x, int N, int H, int G, int D) {
  std::vector<float> out((size_t)N * H * D);
  for (int n = 0; n < N; ++n)
    for (int h = 0; h < H; ++h)
      std::memcpy(&out[((size_t)n * H + h) * D], &x[((size_t)n * G + h / (H / G)) * D], D * 4);
  return out;
}
[[maybe_unused]] std::vector<float> sum_heads(const std::vector<float>& x, int N, int H, int G, int D) {
  std::vector<float> out((size_t)N * G * D, 0.0f);
  for (int n = 0; n < N; ++n)
    for (int h = 0; h < H; ++h)
      for (int d = 0; d < D; ++d) out[((size_t)n * G + h / (H / G)) * D + d] += x[((size_t)n * H + h) * D + d];
  return out;
}

// A device array with poisoned guards after its n elements.
template <class T>
struct Dev {
  T* ptr = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) {
    EXPECT_EQ(cudaMalloc(&ptr, (n + kGuard) * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemset(ptr, 0xFF, (n + kGuard) * sizeof(T)), cudaSuccess);
  }
  ~Dev() { cudaFree(ptr); }
  void upload(const std::vector<float>& v) {
    std::vector<T> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = (T)v[i];
    EXPECT_EQ(cudaMemcpy(ptr, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<float> download() const {
    std::vector<T> h(n + kGuard);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(h.data(), ptr, h.size() * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    const unsigned char* bytes = reinterpret_cast<const unsigned char*>(h.data() + n);
    for (size_t i = 0; i < kGuard * sizeof(T); ++i) EXPECT_EQ(bytes[i], 0xFF) << "guard overwritten";
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = (float)h[i];
    return out;
  }
};
template <>
void Dev<__nv_bfloat16>::upload(const std::vector<float>& v) {
  std::vector<__nv_bfloat16> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = __float2bfloat16(v[i]);
  EXPECT_EQ(cudaMemcpy(ptr, h.data(), h.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
}
template <>
std::vector<float> Dev<__nv_bfloat16>::download() const {
  std::vector<__nv_bfloat16> h(n + kGuard);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(h.data(), ptr, h.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(h.data() + n);
  for (size_t i = 0; i < kGuard * 2; ++i) EXPECT_EQ(bytes[i], 0xFF) << "guard overwritten";
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = __bfloat162float(h[i]);
  return out;
}
using DevB = Dev<__nv_bfloat16>;
using DevF = Dev<float>;

struct Error {
  double nmse, max_abs;
};
Error compare(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0, mx = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = (double)got[i] - want[i];
    num += d * d;
    den += (double)want[i] * want[i];
    mx = std::max(mx, std::abs(d));
  }
  return {num / std::max(den, 1e-30), mx};
}
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double nmse_tol,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_TRUE(std::isfinite(got[i])) << what << " element " << i << " not finite";
  const Error e = compare(got, want);
  EXPECT_LT(e.nmse, nmse_tol) << what << ": nmse " << e.nmse << " max abs " << e.max_abs;
  std::printf("  %-28s nmse %.3e  max abs %.3e\n", what, e.nmse, e.max_abs);
}

// The GPU hybrid against mixers::hybrid_forward<float> (the CPU mixer), and the fused decode step
// token by token against the GPU prefill over the same tokens.
void run_hybrid(int C, int H, int G, int D, int T) {
  HybridShape shape{C, H, G, D, 8, 56};
  auto x = random_floats((size_t)T * C, 1, -1, 1), q = random_floats((size_t)T * H * D, 2, -1, 1),
       k = random_floats((size_t)T * G * D, 3, -1, 1), v = random_floats((size_t)T * G * D, 4, -1, 1);
  round_bf16(x), round_bf16(q), round_bf16(k), round_bf16(v);
  auto conv_q = random_floats((size_t)H * D * 4, 5, -0.6f, 0.6f), conv_k = random_floats((size_t)G * D * 4, 6, -0.6f, 0.6f),
       conv_v = random_floats((size_t)G * D * 4, 7, -0.6f, 0.6f);
  auto w_gates = random_floats((size_t)3 * H * C, 8, -0.1f, 0.1f);
  round_bf16(w_gates);
  auto b_beta = random_floats(H, 9, -1, 1), A_log = random_floats(H, 10, 0, 2.7f),
       dt_bias = random_floats(H, 11, -5, -2), b_lambda = random_floats(H, 12, -1, 1);
  auto inv_freq = random_floats(D / 2, 13, 1e-4f, 1.0f);

  mixers::MixerOptions options;  // gdn, gate, 8 sinks, 56 window, conv
  mixers::AttentionShape ashape{C, H, G, D};
  mixers::HybridTensors<const float*> p;
  p.conv_q = conv_q.data(), p.conv_k = conv_k.data(), p.conv_v = conv_v.data();
  p.w_a = w_gates.data(), p.w_b = w_gates.data() + (size_t)H * C, p.w_lambda = w_gates.data() + 2 * (size_t)H * C;
  p.b_beta = b_beta.data(), p.A_log = A_log.data(), p.dt_bias = dt_bias.data(), p.b_lambda = b_lambda.data();
  mixers::HybridInputs<float> in{T, x.data(), q.data(), k.data(), v.data(), inv_freq.data()};
  std::vector<float> ref((size_t)T * H * D);
  mixers::hybrid_forward<float>(options, ashape, p, in, ref.data());

  DevB dx(x.size()), dq(q.size()), dk(k.size()), dv(v.size()), dw(w_gates.size()), y(ref.size());
  DevF dcq(conv_q.size()), dck(conv_k.size()), dcv(conv_v.size()), dbb(H), dal(H), ddt(H), dbl(H), dinv(D / 2);
  dx.upload(x), dq.upload(q), dk.upload(k), dv.upload(v), dw.upload(w_gates);
  dcq.upload(conv_q), dck.upload(conv_k), dcv.upload(conv_v), dbb.upload(b_beta), dal.upload(A_log),
      ddt.upload(dt_bias), dbl.upload(b_lambda), dinv.upload(inv_freq);
  HybridParams params{dcq.ptr, dck.ptr, dcv.ptr, dw.ptr, dbb.ptr, dal.ptr, ddt.ptr, dbl.ptr, dinv.ptr};
  cublasHandle_t cublas;
  ASSERT_EQ(cublasCreate(&cublas), CUBLAS_STATUS_SUCCESS);
  const size_t ws_bytes = hybrid_forward_workspace_bytes(shape, T);
  void* ws = nullptr;
  ASSERT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
  ASSERT_OK(hybrid_forward(y.ptr, nullptr, shape, params, dx.ptr, dq.ptr, dk.ptr, dv.ptr, T, ws,
                           ws_bytes, cublas, nullptr));
  const auto prefill = y.download();
  expect_close(prefill, ref, 5e-3, "hybrid forward vs cpu");

  void* cache_mem = nullptr;
  ASSERT_EQ(cudaMalloc(&cache_mem, hybrid_cache_bytes(shape)), cudaSuccess);
  auto cache = hybrid_cache_create(shape, cache_mem, nullptr);
  ASSERT_TRUE(cache.ok()) << cache.error();
  DevB y_steps((size_t)T * H * D);
  for (int t = 0; t < T; ++t)
    ASSERT_OK(hybrid_decode_step(y_steps.ptr + (size_t)t * H * D, shape, params, *cache,
                                 dx.ptr + (size_t)t * C, dq.ptr + (size_t)t * H * D,
                                 dk.ptr + (size_t)t * G * D, dv.ptr + (size_t)t * G * D, nullptr));
  expect_close(y_steps.download(), ref, 5e-3, "hybrid decode vs cpu");
  cudaFree(cache_mem);
  cudaFree(ws);
  cublasDestroy(cublas);
}

TEST(CudaHybrid, ForwardMatchesCpuMixerAndDecodeMatchesForward) {
  REQUIRE_GPU();
  run_hybrid(96, 4, 2, 64, 150);
}
// Shorter than sinks + window: no linear-branch rows, the fused mix epilogue must not read y
// (poisoned with NaN by the test) for any row.
TEST(CudaHybrid, ShorterThanWindowMatchesCpuMixer) {
  REQUIRE_GPU();
  run_hybrid(96, 4, 2, 64, 40);
  run_hybrid(64, 2, 2, 128, 1);
}
// D = 128 (4 column blocks per head in the decode step), an odd hidden size (the gate dot
// products' unaligned path) and a sequence long enough for several GDN chunks.
TEST(CudaHybrid, D128OddHiddenMatchesCpuMixer) {
  REQUIRE_GPU();
  run_hybrid(100, 4, 1, 128, 260);
}

}  // namespace
}  // namespace golinear::kernels::cuda
