// The GPU hybrid layer (mixers/cuda/gpu_hybrid_layer.h) against the CPU hybrid mixer
// (mixers/hybrid_mixer.h, the specification): the training forward, and the gradient of every
// parameter for the same upstream gradient dy, by normalized MSE ‖gpu − cpu‖² / ‖cpu‖², with
// NaN/Inf checks and poisoned guard values after the layer's gradient block. Label `gpu`.
//
// Tolerances. The CPU runs on the GPU's inputs (bf16-rounded x, q, k, v) and on the GPU's gate
// weights (w_a, w_b, w_λ rounded to bf16, as the GPU's stacked bf16 copy). What remains is bf16
// storage of the GPU's intermediates: conv outputs, RoPE'd and unit rows, y_exact, y_lin, the
// attention probabilities and the GDN's W/U/P tiles (relative 2^-8 each, NMSE ~1e-5 per
// rounding), chained through 64-token chunks of the GDN: up to ~1e-3 on the forward (threshold
// 5e-3, as tests/kernels/cuda). Gradients add dy_lin stored in bf16 (the GDN backward's input)
// and the GDN backward's fp32 checkpoints made by the bf16 forward: threshold 2e-2, as the
// kernels' backward tests. Sums over T of such products (conv taps, biases, gate weights) do not
// grow the relative error.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "kernels/cuda/cuda_test_util.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/hybrid_train.h"
#include "kernels/cuda/loss.h"
#include "mixers/cuda/gpu_hybrid_layer.h"
#include "mixers/hybrid_mixer.h"

namespace golinear::mixers::cuda {
namespace {

namespace kc = kernels::cuda;

using kernels::test::all_finite;
using kernels::test::bf16_round;
using kernels::test::compare;
using kernels::test::Comparison;
using kernels::test::random_floats;
using kernels::test::round_bf16;
using kernels::test::to_bf16;

// ‖a − b‖² / ‖b‖² (‖a‖² when b is zero).
double nmse(const std::vector<float>& a, const std::vector<float>& b) {
  const Comparison c = compare(a.data(), b.data(), a.size());
  return c.ref > 0 ? c.err / c.ref : c.err;
}

template <class T>
struct DeviceArray {
  T* ptr = nullptr;
  size_t n = 0;
  explicit DeviceArray(size_t count) : n(count) { cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T)); }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~DeviceArray() { cudaFree(ptr); }
  std::vector<T> download() const {
    std::vector<T> out(n);
    cudaMemcpy(out.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost);
    return out;
  }
};

struct Case {
  int T, sinks, window;
};

class GpuHybridLayerTest : public ::testing::TestWithParam<Case> {};

TEST_P(GpuHybridLayerTest, ForwardAndEveryParameterGradientMatchTheCpuMixer) {
  REQUIRE_GPU();
  const Case cs = GetParam();
  const int T = cs.T, C = 128, H = 4, G = 2, D = 64;  // GQA: two query heads per kv head
  const AttentionShape shape{C, H, G, D};
  MixerOptions options;  // the default recipe: gdn, gate, conv
  options.sinks = cs.sinks;
  options.window = cs.window;
  HybridMixer cpu(options, shape, 11);
  // Parameters away from their initial values, so that every gradient path is exercised:
  // conv taps around the identity, a gate that mixes, gate weights exactly representable in bf16.
  uint64_t seed = 100;
  for (Parameter* p : cpu.parameters()) {
    const auto noise = random_floats(p->value.size(), ++seed, -1.0f, 1.0f);
    for (size_t i = 0; i < p->value.size(); ++i) {
      if (p->name.rfind("conv_", 0) == 0) p->value[i] += 0.2f * noise[i];
      else if (p->name == "w_lambda" || p->name == "w_a" || p->name == "w_b") p->value[i] = bf16_round(0.1f * noise[i]);
      else if (p->name == "b_lambda") p->value[i] = -0.5f + 0.5f * noise[i];
      else if (p->name == "b_beta") p->value[i] = 0.5f * noise[i];
    }
  }
  auto x = random_floats((size_t)T * C, 1, -1.0f, 1.0f);
  auto q = random_floats((size_t)T * H * D, 2, -1.0f, 1.0f);
  auto k = random_floats((size_t)T * G * D, 3, -1.0f, 1.0f);
  auto v = random_floats((size_t)T * G * D, 4, -1.0f, 1.0f);
  auto dy = random_floats((size_t)T * H * D, 5, -1.0f, 1.0f);
  round_bf16(x), round_bf16(q), round_bf16(k), round_bf16(v);
  std::vector<float> inv_freq(D / 2);
  for (int i = 0; i < D / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / D);

  // CPU reference: forward, and the parameter gradients of Σ dy·y.
  const MixerInputs in{T, 0, x.data(), q.data(), k.data(), v.data(), inv_freq.data()};
  std::vector<float> y_cpu((size_t)T * H * D);
  cpu.forward(in, y_cpu.data());
  for (Parameter* p : cpu.parameters()) std::fill(p->grad.begin(), p->grad.end(), 0.0f);
  cpu.backward(in, dy.data(), {});

  // GPU: the layer's block with poisoned guards after it (NaN bits: an unwritten gradient or a
  // write past the block is caught).
  const long P = gpu_hybrid_parameter_count(shape), guard = 256;
  DeviceArray<float> value(P + guard), grad(P + guard);
  cudaMemset(value.ptr, 0xFF, (P + guard) * 4);
  cudaMemset(grad.ptr, 0, P * 4);
  cudaMemset(grad.ptr + P, 0xFF, guard * 4);
  auto layer = GpuHybridLayer::create(options, shape, inv_freq, value.ptr, grad.ptr);
  ASSERT_OK(layer);
  ASSERT_OK(layer->upload(cpu, 0));
  GpuHybridScratch scratch;
  ASSERT_OK(scratch.allocate(shape, options, T));
  cublasHandle_t cublas;
  ASSERT_EQ(cublasCreate(&cublas), CUBLAS_STATUS_SUCCESS);
  DeviceArray<bf16> dx(to_bf16(x)), dq(to_bf16(q)), dk(to_bf16(k)), dv(to_bf16(v));
  ASSERT_OK(layer->forward(scratch, dx.ptr, dq.ptr, dk.ptr, dv.ptr, cublas, 0));
  cudaMemcpy(scratch.dy, dy.data(), dy.size() * 4, cudaMemcpyHostToDevice);
  ASSERT_OK(layer->backward(scratch, dx.ptr, dq.ptr, dk.ptr, dv.ptr, cublas, 0));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cublasDestroy(cublas);

  std::vector<float> y_gpu((size_t)T * H * D);
  cudaMemcpy(y_gpu.data(), scratch.y, y_gpu.size() * 4, cudaMemcpyDeviceToHost);
  ASSERT_TRUE(all_finite(y_gpu));
  const double y_err = nmse(y_gpu, y_cpu);
  EXPECT_LT(y_err, 5e-3) << "forward";
  std::printf("T=%d s=%d w=%d  forward nmse %.2e\n", T, cs.sinks, cs.window, y_err);

  const std::vector<float> g_all = grad.download();
  for (long i = P; i < P + guard; ++i) ASSERT_TRUE(std::isnan(g_all[i])) << "guard " << i - P << " overwritten";
  for (const GpuParamSlot& slot : layer->layout()) {
    Parameter* p = nullptr;
    for (Parameter* c : cpu.parameters())
      if (c->name == slot.name) p = c;
    ASSERT_NE(p, nullptr) << slot.name;
    std::vector<float> g(g_all.begin() + slot.offset, g_all.begin() + slot.offset + slot.count);
    ASSERT_TRUE(all_finite(g)) << slot.name;
    const double err = nmse(g, p->grad);
    double ref = 0;
    for (float c : p->grad) ref += (double)c * c;
    std::printf("  d%-9s nmse %.2e  (‖cpu‖² %.3e)\n", slot.name.c_str(), err, ref);
    if (T <= cs.sinks + cs.window && (slot.name == "w_a" || slot.name == "w_b" || slot.name == "b_beta" ||
                                      slot.name == "A_log" || slot.name == "dt_bias")) {
      EXPECT_LT(err, 1e-12) << slot.name << ": no token has left the window, the gradient is 0";
    } else {
      EXPECT_GT(ref, 0.0) << slot.name << ": the CPU gradient is 0, the case tests nothing";
      EXPECT_LT(err, 2e-2) << slot.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuHybridLayerTest,
                         ::testing::Values(Case{50, 8, 56}, Case{50, 4, 16}, Case{200, 8, 56},
                                           Case{700, 8, 56}),
                         [](const auto& info) {
                           return "T" + std::to_string(info.param.T) + "_s" +
                                  std::to_string(info.param.sinks) + "_w" +
                                  std::to_string(info.param.window);
                         });

TEST(GpuHybridLayer, DownloadReturnsWhatUploadGave) {
  REQUIRE_GPU();
  const AttentionShape shape{128, 4, 2, 64};
  MixerOptions options;
  HybridMixer a(options, shape, 1), b(options, shape, 2);
  const long P = gpu_hybrid_parameter_count(shape);
  DeviceArray<float> value(P), grad(P);
  std::vector<float> inv_freq(32, 1.0f);
  auto layer = GpuHybridLayer::create(options, shape, inv_freq, value.ptr, grad.ptr);
  ASSERT_OK(layer);
  ASSERT_OK(layer->upload(a, 0));
  ASSERT_OK(layer->download(b, 0));
  auto pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_EQ(pa[i]->value, pb[i]->value) << pa[i]->name;
}

TEST(GpuHybridLayer, RefusesOtherRecipesWithOneLine) {
  const AttentionShape shape{128, 4, 2, 64};
  MixerOptions ok;
  EXPECT_TRUE(gpu_hybrid_check_recipe(ok, shape).ok());
  MixerOptions add = ok, no_conv = ok, rope = ok, gla = ok, none = ok;
  add.mix = MixKind::add;
  no_conv.conv = false;
  rope.linear_rope = true;
  gla.kind = MixerKind::gla;
  none.sinks = none.window = 0;
  for (const MixerOptions& o : {add, no_conv, rope, gla, none}) {
    const Status st = gpu_hybrid_check_recipe(o, shape);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().find('\n'), std::string::npos);
    EXPECT_NE(st.error().find("default recipe"), std::string::npos) << st.error();
  }
  EXPECT_FALSE(gpu_hybrid_check_recipe(ok, AttentionShape{64, 4, 2, 16}).ok());
}

// The loss kernel against the CPU formula of train/attention_transfer.cpp (nmse_loss).
TEST(HybridTrainKernels, NmseLossAndGradientMatchTheCpuFormula) {
  REQUIRE_GPU();
  const long n = 100003;
  auto s = random_floats(n, 7, -1.0f, 1.0f);
  auto t = random_floats(n, 8, -1.0f, 1.0f);
  round_bf16(t);
  DeviceArray<float> ds(s), ddy(n);
  DeviceArray<bf16> dt(to_bf16(t));
  DeviceArray<double> sums(2);
  DeviceArray<char> ws(kc::nmse_workspace_bytes());
  ASSERT_OK(kc::nmse_loss_forward_backward(sums.ptr, ddy.ptr, ds.ptr, dt.ptr, n, 0.5f, ws.ptr, ws.n, 0));
  const auto got = sums.download();
  const auto dy = ddy.download();
  double err = 0, ref = 0;
  for (long i = 0; i < n; ++i) err += ((double)s[i] - t[i]) * ((double)s[i] - t[i]), ref += (double)t[i] * t[i];
  EXPECT_NEAR(got[0], err, 1e-9 * err);
  EXPECT_NEAR(got[1], ref, 1e-9 * ref);
  double dy_err = 0, dy_ref = 0;
  for (long i = 0; i < n; ++i) {
    const double want = 0.5 * 2.0 * ((double)s[i] - t[i]) / ref;
    dy_err += (dy[i] - want) * (dy[i] - want), dy_ref += want * want;
  }
  EXPECT_LT(dy_err / dy_ref, 1e-12);
  // Deterministic: a second call gives the same bits.
  ASSERT_OK(kc::nmse_loss_forward_backward(sums.ptr, nullptr, ds.ptr, dt.ptr, n, 0.5f, ws.ptr, ws.n, 0));
  EXPECT_EQ(sums.download(), got);
}


// The mix gate fused with the loss (mix_gate_nmse_forward / _backward) against the CPU formula:
// y = (1 − λ) y_exact + λ y_lin, sums Σ(y − t)², Σt²; dy = scale · 2 (y − t) / Σt², then
// dy_exact = (1 − λ) dy, dy_lin = λ dy (bf16), the λ-logit gradient Σ_d dy (y_lin − y_exact) λ(1 − λ).
TEST(HybridTrainKernels, FusedMixAndNmseMatchTheCpuFormula) {
  REQUIRE_GPU();
  const int T = 301, H = 3, D = 64;
  const long n = (long)T * H * D, rows = (long)T * H;
  auto ye = random_floats(n, 21, -1.0f, 1.0f), yl = random_floats(n, 22, -1.0f, 1.0f),
       t = random_floats(n, 23, -1.0f, 1.0f), lam = random_floats(rows, 24, 0.05f, 0.95f);
  round_bf16(ye), round_bf16(yl), round_bf16(t);
  const float scale = 0.25f;
  double err = 0, ref = 0;
  std::vector<double> y(n);
  for (long i = 0; i < n; ++i) {
    const double l = lam[i / D];
    y[i] = (1 - l) * ye[i] + l * yl[i];
    err += (y[i] - t[i]) * (y[i] - t[i]), ref += (double)t[i] * t[i];
  }
  std::vector<float> want_e(n), want_l(n), want_dl(rows);
  for (long r = 0; r < rows; ++r) {
    const double l = lam[r];
    double dl = 0;
    for (int d = 0; d < D; ++d) {
      const long i = r * D + d;
      const double g = scale * 2.0 * (y[i] - t[i]) / ref;
      want_e[i] = (float)((1 - l) * g), want_l[i] = (float)(l * g);
      dl += g * ((double)yl[i] - ye[i]);
    }
    want_dl[r] = (float)(dl * l * (1 - l));
  }
  DeviceArray<bf16> dye(to_bf16(ye)), dyl(to_bf16(yl)), dt(to_bf16(t)), dy_lin(n);
  DeviceArray<float> dlam(lam), dy_exact(n), dlogits((size_t)rows * 3);
  DeviceArray<double> sums(2);
  DeviceArray<char> ws(kc::nmse_workspace_bytes());
  cudaMemset(dlogits.ptr, 0, rows * 3 * 4);
  ASSERT_OK(kc::mix_gate_nmse_forward(sums.ptr, dye.ptr, dyl.ptr, dlam.ptr, dt.ptr, T, H, D, ws.ptr, ws.n, 0));
  ASSERT_OK(kc::mix_gate_nmse_backward(dy_exact.ptr, dy_lin.ptr, dlogits.ptr, sums.ptr, scale, dt.ptr,
                                       dye.ptr, dyl.ptr, dlam.ptr, T, H, D, 0));
  const auto got = sums.download();
  EXPECT_NEAR(got[0], err, 1e-6 * err);
  EXPECT_NEAR(got[1], ref, 1e-9 * ref);
  const std::vector<float> ge = dy_exact.download(), gdl = dlogits.download();
  const std::vector<bf16> gl_raw = dy_lin.download();
  std::vector<float> gl(n), glam(rows);
  for (long i = 0; i < n; ++i) gl[i] = __bfloat162float(gl_raw[i]);
  for (long r = 0; r < rows; ++r) glam[r] = gdl[(r / H) * 3 * H + 2 * H + r % H];
  ASSERT_TRUE(all_finite(ge) && all_finite(gl) && all_finite(glam));
  std::printf("fused mix+nmse: dy_exact %.2e dy_lin %.2e dλ %.2e\n", nmse(ge, want_e), nmse(gl, want_l),
              nmse(glam, want_dl));
  EXPECT_LT(nmse(ge, want_e), 1e-10);
  EXPECT_LT(nmse(gl, want_l), 1e-4);  // bf16 storage
  EXPECT_LT(nmse(glam, want_dl), 1e-8);
  for (long r = 0; r < rows; ++r)  // the a, b columns are not the mix's
    ASSERT_EQ(gdl[(r / H) * 3 * H + r % H], 0.0f);
}

// The gate-weight gradient as the layer computes it: dlogits (T, 3H) fp32 split into a bf16 pair,
// two bf16 GEMMs accumulating (+=) into dW (3H, C), against the CPU in double.
TEST(HybridTrainKernels, GateWeightGradientFromABf16PairMatchesTheCpu) {
  REQUIRE_GPU();
  const int T = 517, N = 12, C = 136;
  auto dl = random_floats((size_t)T * N, 31, -1.0f, 1.0f), x = random_floats((size_t)T * C, 32, -1.0f, 1.0f),
       w0 = random_floats((size_t)N * C, 33, -1.0f, 1.0f);
  round_bf16(x);
  std::vector<float> want = w0;
  for (int i = 0; i < N; ++i)
    for (int c = 0; c < C; ++c) {
      double acc = 0;
      for (int t = 0; t < T; ++t) acc += (double)dl[(size_t)t * N + i] * x[(size_t)t * C + c];
      want[(size_t)i * C + c] = (float)(w0[(size_t)i * C + c] + acc);
    }
  DeviceArray<float> ddl(dl), dw(w0);
  DeviceArray<bf16> dx(to_bf16(x)), hi((size_t)T * N), lo((size_t)T * N);
  cublasHandle_t cublas;
  ASSERT_EQ(cublasCreate(&cublas), CUBLAS_STATUS_SUCCESS);
  ASSERT_OK(kc::split_f32_to_bf16_pair(hi.ptr, lo.ptr, ddl.ptr, (long)T * N, 0));
  ASSERT_OK(kc::gemm_bf16_tn_accumulate(cublas, dw.ptr, hi.ptr, dx.ptr, T, N, C, 0));
  ASSERT_OK(kc::gemm_bf16_tn_accumulate(cublas, dw.ptr, lo.ptr, dx.ptr, T, N, C, 0));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cublasDestroy(cublas);
  const auto got = dw.download();
  ASSERT_TRUE(all_finite(got));
  std::printf("gate-weight gradient (bf16 pair): nmse %.2e\n", nmse(got, want));
  EXPECT_LT(nmse(got, want), 1e-9);
}

// The attention-transfer path of the layer (forward without the mix, loss_nmse, backward_nmse)
// against the unfused one (forward, nmse_loss_forward_backward into s.dy, backward): the same
// loss sums and parameter gradients up to rounding.
TEST(GpuHybridLayer, FusedNmsePathEqualsTheUnfusedOne) {
  REQUIRE_GPU();
  const int T = 300, C = 128, H = 4, G = 2, D = 64;
  const AttentionShape shape{C, H, G, D};
  MixerOptions options;
  options.sinks = 4, options.window = 28;
  HybridMixer cpu(options, shape, 5);
  uint64_t seed = 300;
  for (Parameter* p : cpu.parameters()) {
    const auto noise = random_floats(p->value.size(), ++seed, -1.0f, 1.0f);
    for (size_t i = 0; i < p->value.size(); ++i) {
      if (p->name.rfind("conv_", 0) == 0) p->value[i] += 0.2f * noise[i];
      else if (p->name == "w_lambda" || p->name == "w_a" || p->name == "w_b") p->value[i] = 0.1f * noise[i];
      else if (p->name == "b_lambda") p->value[i] = -0.5f + 0.5f * noise[i];
    }
  }
  auto x = random_floats((size_t)T * C, 1, -1.0f, 1.0f), q = random_floats((size_t)T * H * D, 2, -1.0f, 1.0f),
       k = random_floats((size_t)T * G * D, 3, -1.0f, 1.0f), v = random_floats((size_t)T * G * D, 4, -1.0f, 1.0f),
       t = random_floats((size_t)T * H * D, 6, -0.5f, 0.5f);
  std::vector<float> inv_freq(D / 2);
  for (int i = 0; i < D / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / D);
  const long P = gpu_hybrid_parameter_count(shape), n = (long)T * H * D;
  DeviceArray<float> value(P), grad_a(P), grad_b(P);
  cudaMemset(grad_a.ptr, 0, P * 4), cudaMemset(grad_b.ptr, 0, P * 4);
  auto la = GpuHybridLayer::create(options, shape, inv_freq, value.ptr, grad_a.ptr);
  auto lb = GpuHybridLayer::create(options, shape, inv_freq, value.ptr, grad_b.ptr);
  ASSERT_OK(la);
  ASSERT_OK(lb);
  ASSERT_OK(la->upload(cpu, 0));
  ASSERT_OK(lb->upload(cpu, 0));
  GpuHybridScratch scratch;
  ASSERT_OK(scratch.allocate(shape, options, T));
  cublasHandle_t cublas;
  ASSERT_EQ(cublasCreate(&cublas), CUBLAS_STATUS_SUCCESS);
  DeviceArray<bf16> dx(to_bf16(x)), dq(to_bf16(q)), dk(to_bf16(k)), dv(to_bf16(v)), dt(to_bf16(t));
  DeviceArray<double> sums_a(2), sums_b(2);
  const float scale = 0.5f;
  ASSERT_OK(la->forward(scratch, dx.ptr, dq.ptr, dk.ptr, dv.ptr, cublas, 0));
  ASSERT_OK(kc::nmse_loss_forward_backward(sums_a.ptr, scratch.dy, scratch.y, dt.ptr, n, scale,
                                           scratch.nmse_ws, scratch.nmse_bytes, 0));
  ASSERT_OK(la->backward(scratch, dx.ptr, dq.ptr, dk.ptr, dv.ptr, cublas, 0));
  ASSERT_OK(lb->forward(scratch, dx.ptr, dq.ptr, dk.ptr, dv.ptr, cublas, 0, false));
  ASSERT_OK(lb->loss_nmse(scratch, sums_b.ptr, dt.ptr, 0));
  ASSERT_OK(lb->backward_nmse(scratch, sums_b.ptr, scale, dt.ptr, dx.ptr, dq.ptr, dk.ptr, dv.ptr, cublas, 0));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cublasDestroy(cublas);
  const auto a = sums_a.download(), b = sums_b.download();
  EXPECT_NEAR(b[0], a[0], 1e-6 * a[0]);
  EXPECT_EQ(b[1], a[1]);
  const auto ga = grad_a.download(), gb = grad_b.download();
  ASSERT_TRUE(all_finite(gb));
  for (const GpuParamSlot& slot : la->layout()) {
    std::vector<float> pa(ga.begin() + slot.offset, ga.begin() + slot.offset + slot.count),
        pb(gb.begin() + slot.offset, gb.begin() + slot.offset + slot.count);
    const double e = nmse(pb, pa);
    std::printf("  fused vs unfused d%-9s nmse %.2e\n", slot.name.c_str(), e);
    EXPECT_LT(e, 1e-8) << slot.name;
  }
}

}  // namespace
}  // namespace golinear::mixers::cuda
