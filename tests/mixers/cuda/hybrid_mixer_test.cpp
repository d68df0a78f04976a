// The GPU hybrid mixer (mixers/cuda/hybrid_mixer.h) against the CPU hybrid mixer
// (mixers/hybrid_mixer.h, the specification), recipe by recipe: the inference forward, the
// training forward, the decode step over a batch of two sequences (from an empty cache and after
// a prefill), and the gradient of every parameter and input for the same upstream gradient dy,
// by normalized MSE ‖gpu − cpu‖² / ‖cpu‖², with NaN/Inf checks and poisoned guard values after
// the layer's parameter and gradient blocks. Label `gpu`.
//
// Tolerances. The CPU runs on the GPU's inputs (bf16-rounded x, q, k, v) and on the GPU's gate
// weights (rounded to bf16, as the GPU's stacked bf16 copy). What remains is bf16 storage of the
// GPU's intermediates: conv outputs, RoPE'd and unit rows, y_exact, y_lin, the attention
// probabilities and the GDN's W/U/P tiles (relative 2^-8 each, NMSE ~1e-5 per rounding), chained
// through 64-token chunks of the GDN: up to ~1e-3 on the forward (threshold 5e-3, as
// tests/kernels/cuda). Gradients add dy_lin stored in bf16 (the GDN backward's input) and the GDN
// backward's fp32 checkpoints made by the bf16 forward: threshold 2e-2, as the kernels' backward
// tests. Sums over T of such products (conv taps, biases, gate weights) do not grow the relative
// error.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_test_util.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/hybrid.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/loss.h"
#include "mixers/cuda/hybrid_mixer.h"
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
double sum_squares(const std::vector<float>& a) {
  double s = 0;
  for (float x : a) s += (double)x * x;
  return s;
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
std::vector<float> to_float(const std::vector<bf16>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = __bfloat162float(v[i]);
  return out;
}

// One row of the recipe table.
struct Recipe {
  const char* name;
  MixerKind kind;
  MixKind mix;
  int sinks, window;
  bool conv, linear_rope;
  int T, C, H, G, D;
  MixerOptions options() const {
    MixerOptions o;
    o.kind = kind, o.mix = mix, o.sinks = sinks, o.window = window, o.conv = conv;
    o.linear_rope = linear_rope;
    return o;
  }
};

// Parameters away from their initial values, so that every gradient path is exercised: conv taps
// around the identity, gates that mix, gate weights exactly representable in bf16, a gate-lse
// coefficient and a scale that are not 0.
void perturb(HybridMixer& cpu, uint64_t seed) {
  for (Parameter* p : cpu.parameters()) {
    const auto noise = random_floats(p->value.size(), ++seed, -1.0f, 1.0f);
    for (size_t i = 0; i < p->value.size(); ++i) {
      if (p->name.rfind("conv_", 0) == 0) p->value[i] += 0.2f * noise[i];
      else if (p->name == "w_lambda" || p->name == "w_a" || p->name == "w_b") p->value[i] = bf16_round(0.1f * noise[i]);
      else if (p->name == "b_lambda") p->value[i] = -0.5f + 0.5f * noise[i];
      else if (p->name == "b_beta") p->value[i] = 0.5f * noise[i];
      else if (p->name == "c_lse") p->value[i] = 0.3f + 0.2f * noise[i];
      else if (p->name == "a_far") p->value[i] = 0.5f + 0.3f * noise[i];
      else if (p->name == "gamma") p->value[i] = 0.5f + 0.3f * noise[i];
    }
  }
}

// Inputs of one sequence, bf16-rounded.
struct Inputs {
  std::vector<float> x, q, k, v;
  Inputs(const Recipe& r, uint64_t seed)
      : x(random_floats((size_t)r.T * r.C, seed + 1, -1.0f, 1.0f)),
        q(random_floats((size_t)r.T * r.H * r.D, seed + 2, -1.0f, 1.0f)),
        k(random_floats((size_t)r.T * r.G * r.D, seed + 3, -1.0f, 1.0f)),
        v(random_floats((size_t)r.T * r.G * r.D, seed + 4, -1.0f, 1.0f)) {
    round_bf16(x), round_bf16(q), round_bf16(k), round_bf16(v);
  }
};

std::vector<float> rope_frequencies(int D) {
  std::vector<float> inv_freq(D / 2);
  for (int i = 0; i < D / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / D);
  return inv_freq;
}

class GpuHybridMixerRecipes : public ::testing::TestWithParam<Recipe> {};

TEST_P(GpuHybridMixerRecipes, ForwardDecodeAndEveryGradientMatchTheCpuMixer) {
  REQUIRE_GPU();
  const Recipe r = GetParam();
  const int T = r.T, C = r.C, H = r.H, G = r.G, D = r.D;
  const AttentionShape shape{C, H, G, D};
  const MixerOptions options = r.options();
  ASSERT_OK(hybrid_check_recipe(options, shape));
  HybridMixer cpu(options, shape, 11);
  perturb(cpu, 100);
  const Inputs in0(r, 0), in1(r, 10);
  auto dy = random_floats((size_t)T * H * D, 5, -1.0f, 1.0f);
  const std::vector<float> inv_freq = rope_frequencies(D);

  // CPU reference: forward of both sequences, the gradients of Σ dy·y for the first.
  auto cpu_forward = [&](const Inputs& in) {
    std::vector<float> y((size_t)T * H * D);
    cpu.forward(MixerInputs{T, 0, in.x.data(), in.q.data(), in.k.data(), in.v.data(), inv_freq.data()}, y.data());
    return y;
  };
  const std::vector<float> y0 = cpu_forward(in0), y1 = cpu_forward(in1);
  for (Parameter* p : cpu.parameters()) std::fill(p->grad.begin(), p->grad.end(), 0.0f);
  std::vector<float> dx_cpu(in0.x.size()), dq_cpu(in0.q.size()), dk_cpu(in0.k.size()), dv_cpu(in0.v.size());
  cpu.backward(MixerInputs{T, 0, in0.x.data(), in0.q.data(), in0.k.data(), in0.v.data(), inv_freq.data()},
               dy.data(), MixerInputGrads{dx_cpu.data(), dq_cpu.data(), dk_cpu.data(), dv_cpu.data()});

  // GPU: the layer's blocks with poisoned guards after them (NaN bits: an unwritten gradient or
  // a write past the block is caught).
  const long P = hybrid_parameter_count(options, shape), guard = 256;
  DeviceArray<float> value(P + guard), grad(P + guard);
  cudaMemset(value.ptr, 0xFF, (P + guard) * 4);
  cudaMemset(grad.ptr, 0, P * 4);
  cudaMemset(grad.ptr + P, 0xFF, guard * 4);
  auto mixer = GpuHybridMixer::create(options, shape, inv_freq, value.ptr, grad.ptr);
  ASSERT_OK(mixer);
  ASSERT_OK(mixer->upload(cpu, 0));
  HybridScratch scratch;
  ASSERT_OK(scratch.reserve(std::max(HybridScratch::bytes(options, shape, T, true),
                                     HybridScratch::bytes(options, shape, T, false))));
  cublasHandle_t cublas;
  ASSERT_EQ(cublasCreate(&cublas), CUBLAS_STATUS_SUCCESS);
  DeviceArray<bf16> dx(to_bf16(in0.x)), dq(to_bf16(in0.q)), dk(to_bf16(in0.k)), dv(to_bf16(in0.v));
  const HybridIO io{T, dx.ptr, dq.ptr, dk.ptr, dv.ptr};

  // 1 inference forward (bf16 out) and training forward (fp32 out).
  DeviceArray<bf16> y16((size_t)T * H * D);
  cudaMemset(y16.ptr, 0xFF, y16.n * 2);
  ASSERT_OK(mixer->forward(scratch, io, y16.ptr, nullptr, cublas, 0));
  DeviceArray<float> y32((size_t)T * H * D), dy_dev(dy), gx((size_t)T * C), gq(in0.q.size()),
      gk(in0.k.size()), gv(in0.v.size());
  ASSERT_OK(mixer->forward_train(scratch, io, y32.ptr, cublas, 0));
  ASSERT_OK(mixer->backward(scratch, io, dy_dev.ptr, cublas, 0, gx.ptr, gq.ptr, gk.ptr, gv.ptr));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> fwd16 = to_float(y16.download()), fwd32 = y32.download();
  ASSERT_TRUE(all_finite(fwd16) && all_finite(fwd32));
  EXPECT_LT(nmse(fwd16, y0), 5e-3) << "inference forward";
  EXPECT_LT(nmse(fwd32, y0), 5e-3) << "training forward";
  std::printf("%s: forward nmse %.2e (inference) %.2e (training)\n", r.name, nmse(fwd16, y0),
              nmse(fwd32, y0));

  // 2 gradients: every parameter, every input.
  const std::vector<float> g_all = grad.download();
  for (long i = P; i < P + guard; ++i) ASSERT_TRUE(std::isnan(g_all[i])) << "guard " << i - P << " overwritten";
  for (const GpuParamSlot& slot : mixer->layout()) {
    Parameter* p = nullptr;
    for (Parameter* c : cpu.parameters())
      if (c->name == slot.name) p = c;
    ASSERT_NE(p, nullptr) << slot.name;
    std::vector<float> g(g_all.begin() + slot.offset, g_all.begin() + slot.offset + slot.count);
    ASSERT_TRUE(all_finite(g)) << slot.name;
    const double err = nmse(g, p->grad), ref = sum_squares(p->grad);
    std::printf("  d%-9s nmse %.2e  (‖cpu‖² %.3e)\n", slot.name.c_str(), err, ref);
    const bool state_only = slot.name == "w_a" || slot.name == "w_b" || slot.name == "b_beta" ||
                            slot.name == "A_log" || slot.name == "dt_bias";
    if (T <= r.sinks + r.window && state_only) {
      EXPECT_LT(err, 1e-12) << slot.name << ": no token has left the window, the gradient is 0";
      continue;
    }
    EXPECT_GT(ref, 0.0) << slot.name << ": the CPU gradient is 0, the case tests nothing";
    EXPECT_LT(err, 2e-2) << slot.name;
  }
  const struct {
    const char* name;
    std::vector<float> got, want;
  } inputs[] = {{"dx", gx.download(), dx_cpu}, {"dq", gq.download(), dq_cpu},
                {"dk", gk.download(), dk_cpu}, {"dv", gv.download(), dv_cpu}};
  for (const auto& g : inputs) {
    ASSERT_TRUE(all_finite(g.got)) << g.name;
    const double ref = sum_squares(g.want), err = nmse(g.got, g.want);
    std::printf("  %-10s nmse %.2e  (‖cpu‖² %.3e)\n", g.name, err, ref);
    if (ref == 0) EXPECT_EQ(sum_squares(g.got), 0.0) << g.name;  // e.g. dx of mixer none
    else EXPECT_LT(err, 2e-2) << g.name;
  }

  // 3 decode: two sequences stepped together from empty caches, then the same two with the first
  //   P0 tokens prefilled (sequence by sequence) and the rest stepped together; each with the
  //   heads' columns in one block and split over D / 32 blocks: the same bits (outputs, caches).
  const int B = 2, P0 = T / 3;
  std::vector<float> xs((size_t)T * B * C), qs((size_t)T * B * H * D), ks((size_t)T * B * G * D),
      vs((size_t)T * B * G * D);
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < B; ++b) {
      const Inputs& in = b == 0 ? in0 : in1;
      std::copy_n(in.x.data() + (size_t)t * C, C, xs.data() + ((size_t)t * B + b) * C);
      std::copy_n(in.q.data() + (size_t)t * H * D, H * D, qs.data() + ((size_t)t * B + b) * H * D);
      std::copy_n(in.k.data() + (size_t)t * G * D, G * D, ks.data() + ((size_t)t * B + b) * G * D);
      std::copy_n(in.v.data() + (size_t)t * G * D, G * D, vs.data() + ((size_t)t * B + b) * G * D);
    }
  DeviceArray<bf16> dxs(to_bf16(xs)), dqs(to_bf16(qs)), dks(to_bf16(ks)), dvs(to_bf16(vs)),
      ys((size_t)T * B * H * D);
  DeviceArray<char> cache_memory(B * mixer->cache_bytes());
  DeviceArray<kc::HybridCacheView> views(B);
  std::vector<float> steps_one;  // of the run before (splits = 1)
  std::vector<char> caches_one;
  for (int run = 0; run < 4; ++run) {
    const int with_prefill = run / 2, splits = run % 2 ? D / 32 : 1;
    const int first = with_prefill ? P0 : 0;
    std::vector<kc::HybridCacheView> host(B);
    for (int b = 0; b < B; ++b) {
      auto view = mixer->cache_create(cache_memory.ptr + b * mixer->cache_bytes(), 0);
      ASSERT_OK(view);
      host[b] = *view;
    }
    cudaMemcpy(views.ptr, host.data(), B * sizeof(kc::HybridCacheView), cudaMemcpyHostToDevice);
    cudaMemset(ys.ptr, 0xFF, ys.n * 2);
    std::vector<std::vector<float>> prefilled(B);
    if (first > 0) {
      for (int b = 0; b < B; ++b) {
        const Inputs& in = b == 0 ? in0 : in1;
        std::vector<float> px(in.x.begin(), in.x.begin() + (size_t)first * C),
            pq(in.q.begin(), in.q.begin() + (size_t)first * H * D),
            pk(in.k.begin(), in.k.begin() + (size_t)first * G * D),
            pv(in.v.begin(), in.v.begin() + (size_t)first * G * D);
        DeviceArray<bf16> ax(to_bf16(px)), aq(to_bf16(pq)), ak(to_bf16(pk)), av(to_bf16(pv)),
            ay((size_t)first * H * D);
        ASSERT_OK(mixer->prefill(scratch, HybridIO{first, ax.ptr, aq.ptr, ak.ptr, av.ptr}, ay.ptr,
                                 host[b], cublas, 0));
        prefilled[b] = to_float(ay.download());
      }
    }
    for (int t = first; t < T; ++t)
      ASSERT_OK(mixer->decode_step(ys.ptr + (size_t)t * B * H * D, views.ptr, B,
                                   dxs.ptr + (size_t)t * B * C, dqs.ptr + (size_t)t * B * H * D,
                                   dks.ptr + (size_t)t * B * G * D, dvs.ptr + (size_t)t * B * G * D, 0,
                                   kc::HybridDecodeLaunch{splits}));
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> steps = to_float(ys.download());
    const std::vector<char> caches = cache_memory.download();
    if (splits == 1) {
      steps_one = steps, caches_one = caches;
    } else {
      ASSERT_EQ(steps.size(), steps_one.size());
      for (size_t i = 0; i < steps.size(); ++i)
        ASSERT_EQ(std::memcmp(&steps[i], &steps_one[i], sizeof(float)), 0)
            << "decode output " << i << " with " << splits << " column splits";
      ASSERT_EQ(caches, caches_one) << "decode caches with " << splits << " column splits";
    }
    for (int b = 0; b < B; ++b) {
      std::vector<float> got((size_t)T * H * D);
      for (int t = 0; t < T; ++t)
        for (int i = 0; i < H * D; ++i)
          got[(size_t)t * H * D + i] = t < first ? prefilled[b][(size_t)t * H * D + i]
                                                 : steps[((size_t)t * B + b) * H * D + i];
      ASSERT_TRUE(all_finite(got)) << "decode, sequence " << b;
      const double err = nmse(got, b == 0 ? y0 : y1);
      std::printf("  decode (%s, %d column split%s) sequence %d nmse %.2e\n",
                  first ? "after a prefill" : "from empty", splits, splits > 1 ? "s" : "", b, err);
      EXPECT_LT(err, 5e-3) << "decode " << (first ? "after a prefill" : "from empty") << ", sequence " << b;
    }
  }
  cublasDestroy(cublas);
}

// Every GDN recipe of the RESULTS ablations and the decode paths' edge cases.
INSTANTIATE_TEST_SUITE_P(
    Recipes, GpuHybridMixerRecipes,
    ::testing::Values(
        Recipe{"default", MixerKind::gdn, MixKind::gate, 8, 56, true, false, 200, 128, 4, 2, 64},
        Recipe{"shorter_than_window", MixerKind::gdn, MixKind::gate, 8, 56, true, false, 40, 128, 4, 2, 64},
        Recipe{"gate_lse", MixerKind::gdn, MixKind::gate_lse, 8, 56, true, false, 200, 128, 4, 2, 64},
        Recipe{"split", MixerKind::gdn, MixKind::split, 8, 56, true, false, 200, 128, 4, 2, 64},
        Recipe{"split_window_8_d128", MixerKind::gdn, MixKind::split, 4, 8, true, false, 150, 100, 4, 1, 128},
        Recipe{"add", MixerKind::gdn, MixKind::add, 8, 56, true, false, 200, 128, 4, 2, 64},
        Recipe{"scale", MixerKind::gdn, MixKind::scale, 8, 56, true, false, 200, 128, 4, 2, 64},
        Recipe{"no_conv", MixerKind::gdn, MixKind::gate, 8, 56, false, false, 200, 128, 4, 2, 64},
        Recipe{"linear_rope", MixerKind::gdn, MixKind::gate, 8, 56, true, true, 200, 128, 4, 2, 64},
        Recipe{"none", MixerKind::none, MixKind::gate, 8, 56, true, false, 200, 128, 4, 2, 64},
        Recipe{"pure_replacement", MixerKind::gdn, MixKind::gate, 0, 0, true, false, 150, 128, 4, 2, 64},
        Recipe{"sinks_only", MixerKind::gdn, MixKind::gate, 4, 0, true, false, 150, 128, 4, 2, 64},
        Recipe{"swa_only", MixerKind::none, MixKind::gate, 0, 64, true, false, 150, 128, 4, 2, 64},
        Recipe{"window_1000", MixerKind::gdn, MixKind::gate, 16, 1000, true, false, 1100, 128, 4, 2, 64},
        Recipe{"d128_gqa4_odd_hidden_lse", MixerKind::gdn, MixKind::gate_lse, 8, 56, true, true, 260, 100, 4, 1, 128},
        // The 8B decode's kernel: D = 128, three gate rows, column-split blocks (C % 8 == 0: an
        // odd C runs unsplit) that stage their gate rows and update their state before the wait.
        Recipe{"d128_gqa4_lse_split", MixerKind::gdn, MixKind::gate_lse, 8, 56, true, false, 260, 128, 4, 1, 128}),
    [](const auto& info) { return std::string(info.param.name); });

// Mix split on the GPU is exact where exactness is possible: at t < s + w its output equals, to
// the bit, that of mixer `none` (the exact branch alone) with the same conv taps, in the inference
// forward, the training forward and the decode step; past s + w the state comes in.
TEST(GpuHybridMixer, SplitIsTheExactBranchUntilATokenLeavesTheExactSet) {
  REQUIRE_GPU();
  const Recipe r{"split", MixerKind::gdn, MixKind::split, 8, 56, true, false, 160, 128, 4, 2, 64};
  const int T = r.T, H = r.H, D = r.D, shift = r.sinks + r.window;
  const AttentionShape shape{r.C, r.H, r.G, r.D};
  const std::vector<float> inv_freq = rope_frequencies(D);
  const Inputs in(r, 40);
  cublasHandle_t cublas;
  ASSERT_EQ(cublasCreate(&cublas), CUBLAS_STATUS_SUCCESS);
  DeviceArray<bf16> dx(to_bf16(in.x)), dq(to_bf16(in.q)), dk(to_bf16(in.k)), dv(to_bf16(in.v));
  HybridMixer split_cpu(r.options(), shape, 11);
  perturb(split_cpu, 300);
  MixerOptions none_options = r.options();
  none_options.kind = MixerKind::none;
  HybridMixer none_cpu(none_options, shape, 11);
  for (Parameter* p : none_cpu.parameters())
    for (Parameter* q : split_cpu.parameters())
      if (q->name == p->name) p->value = q->value;
  // Inference (bf16), training (fp32) and decode (bf16) outputs of one mixer.
  auto run = [&](HybridMixer& cpu, std::vector<float>& inference, std::vector<float>& train,
                 std::vector<float>& decode) {
    const long P = hybrid_parameter_count(cpu.options(), shape);
    DeviceArray<float> value(P), grad(P);
    auto mixer = GpuHybridMixer::create(cpu.options(), shape, inv_freq, value.ptr, grad.ptr);
    ASSERT_OK(mixer);
    ASSERT_OK(mixer->upload(cpu, 0));
    HybridScratch scratch;
    ASSERT_OK(scratch.reserve(std::max(HybridScratch::bytes(cpu.options(), shape, T, true),
                                       HybridScratch::bytes(cpu.options(), shape, T, false))));
    const HybridIO io{T, dx.ptr, dq.ptr, dk.ptr, dv.ptr};
    DeviceArray<bf16> y16((size_t)T * H * D), ys((size_t)T * H * D);
    DeviceArray<float> y32((size_t)T * H * D);
    ASSERT_OK(mixer->forward(scratch, io, y16.ptr, nullptr, cublas, 0));
    ASSERT_OK(mixer->forward_train(scratch, io, y32.ptr, cublas, 0));
    DeviceArray<char> cache_memory(mixer->cache_bytes());
    auto view = mixer->cache_create(cache_memory.ptr, 0);
    ASSERT_OK(view);
    DeviceArray<kc::HybridCacheView> views(std::vector<kc::HybridCacheView>{*view});
    for (int t = 0; t < T; ++t)
      ASSERT_OK(mixer->decode_step(ys.ptr + (size_t)t * H * D, views.ptr, 1, dx.ptr + (size_t)t * r.C,
                                   dq.ptr + (size_t)t * H * D, dk.ptr + (size_t)t * r.G * D,
                                   dv.ptr + (size_t)t * r.G * D, 0));
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    inference = to_float(y16.download()), train = y32.download(), decode = to_float(ys.download());
  };
  std::vector<float> si, st, sd, ni, nt, nd;
  run(split_cpu, si, st, sd);
  run(none_cpu, ni, nt, nd);
  const size_t exact_part = (size_t)shift * H * D;
  for (size_t i = 0; i < exact_part; ++i) {
    ASSERT_EQ(si[i], ni[i]) << "inference forward, position " << i / (H * D);
    ASSERT_EQ(st[i], nt[i]) << "training forward, position " << i / (H * D);
    ASSERT_EQ(sd[i], nd[i]) << "decode, position " << i / (H * D);
  }
  double after = 0;
  for (size_t i = exact_part; i < si.size(); ++i) after = std::max(after, (double)std::fabs(si[i] - ni[i]));
  EXPECT_GT(after, 1e-3) << "the linear branch never contributes";
  cublasDestroy(cublas);
}

TEST(GpuHybridMixer, DownloadReturnsWhatUploadGave) {
  REQUIRE_GPU();
  const AttentionShape shape{128, 4, 2, 64};
  MixerOptions options;
  options.mix = MixKind::gate_lse;
  HybridMixer a(options, shape, 1), b(options, shape, 2);
  perturb(a, 7);
  const long P = hybrid_parameter_count(options, shape);
  DeviceArray<float> value(P), grad(P);
  auto layer = GpuHybridMixer::create(options, shape, rope_frequencies(64), value.ptr, grad.ptr);
  ASSERT_OK(layer);
  ASSERT_OK(layer->upload(a, 0));
  ASSERT_OK(layer->download(b, 0));
  auto pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_EQ(pa[i]->value, pb[i]->value) << pa[i]->name;
}

// The layout holds every tensor of the CPU mixer by its name, the gate matrices first.
TEST(GpuHybridMixer, LayoutHasTheCpuNamesWithTheGateMatricesFirst) {
  const AttentionShape shape{128, 4, 2, 64};
  MixerOptions options;
  const auto layout = hybrid_layout(options, shape);
  const auto specs = hybrid_tensor_specs(options, shape);
  ASSERT_EQ(layout.size(), specs.size());
  EXPECT_EQ(layout[0].name, "w_a");
  EXPECT_EQ(layout[1].name, "w_b");
  EXPECT_EQ(layout[2].name, "w_lambda");
  EXPECT_EQ(layout[1].offset, 4 * 128);
  long total = 0;
  for (const TensorSpec& s : specs) {
    long n = 1;
    for (int64_t d : s.shape) n *= d;
    total += n;
    bool found = false;
    for (const GpuParamSlot& slot : layout) found |= slot.name == s.name && slot.count == n;
    EXPECT_TRUE(found) << s.name;
  }
  EXPECT_EQ(hybrid_parameter_count(options, shape), total);
}

TEST(GpuHybridMixer, RefusesTheCpuOnlyStatesAndHeadDimsWithOneLine) {
  const AttentionShape shape{128, 4, 2, 64};
  for (MixerKind kind : {MixerKind::gla, MixerKind::kgla, MixerKind::hedgehog}) {
    MixerOptions o;
    o.kind = kind;
    const Status st = hybrid_check_recipe(o, shape);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().find('\n'), std::string::npos);
    EXPECT_NE(st.error().find("CPU only"), std::string::npos) << st.error();
  }
  MixerOptions big;
  big.window = kc::kHybridDecodeMaxKeys;
  EXPECT_FALSE(hybrid_check_recipe(big, shape).ok());
  EXPECT_FALSE(hybrid_check_recipe(MixerOptions{}, AttentionShape{64, 4, 2, 16}).ok());
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

// The attention-transfer path (forward_train without y, loss_nmse, backward_nmse: the mixing
// fused with the loss) against the unfused one (forward_train into y, nmse_loss_forward_backward
// into dy, backward): the same loss sums and parameter gradients up to rounding. For the gate
// and the scale mix (the two whose coefficient has a gradient).
TEST(GpuHybridMixer, FusedNmsePathEqualsTheUnfusedOne) {
  REQUIRE_GPU();
  for (MixKind mix : {MixKind::gate, MixKind::scale, MixKind::gate_lse}) {
    const int T = 300, C = 128, H = 4, G = 2, D = 64;
    const AttentionShape shape{C, H, G, D};
    MixerOptions options;
    options.sinks = 4, options.window = 28, options.mix = mix;
    HybridMixer cpu(options, shape, 5);
    perturb(cpu, 300);
    auto x = random_floats((size_t)T * C, 1, -1.0f, 1.0f), q = random_floats((size_t)T * H * D, 2, -1.0f, 1.0f),
         k = random_floats((size_t)T * G * D, 3, -1.0f, 1.0f), v = random_floats((size_t)T * G * D, 4, -1.0f, 1.0f),
         t = random_floats((size_t)T * H * D, 6, -0.5f, 0.5f);
    const long P = hybrid_parameter_count(options, shape), n = (long)T * H * D;
    DeviceArray<float> value(P), grad_a(P), grad_b(P), y(n), dy(n);
    cudaMemset(grad_a.ptr, 0, P * 4), cudaMemset(grad_b.ptr, 0, P * 4);
    auto la = GpuHybridMixer::create(options, shape, rope_frequencies(D), value.ptr, grad_a.ptr);
    auto lb = GpuHybridMixer::create(options, shape, rope_frequencies(D), value.ptr, grad_b.ptr);
    ASSERT_OK(la);
    ASSERT_OK(lb);
    ASSERT_OK(la->upload(cpu, 0));
    ASSERT_OK(lb->upload(cpu, 0));  // the same values; each mixer has its own bf16 gate copy
    HybridScratch scratch;
    ASSERT_OK(scratch.reserve(HybridScratch::bytes(options, shape, T, true)));
    DeviceArray<char> ws(kc::nmse_workspace_bytes());
    cublasHandle_t cublas;
    ASSERT_EQ(cublasCreate(&cublas), CUBLAS_STATUS_SUCCESS);
    DeviceArray<bf16> dx(to_bf16(x)), dq(to_bf16(q)), dk(to_bf16(k)), dv(to_bf16(v)), dt(to_bf16(t));
    const HybridIO io{T, dx.ptr, dq.ptr, dk.ptr, dv.ptr};
    DeviceArray<double> sums_a(2), sums_b(2);
    const float scale = 0.5f;
    ASSERT_OK(la->forward_train(scratch, io, y.ptr, cublas, 0));
    ASSERT_OK(kc::nmse_loss_forward_backward(sums_a.ptr, dy.ptr, y.ptr, dt.ptr, n, scale, ws.ptr, ws.n, 0));
    ASSERT_OK(la->backward(scratch, io, dy.ptr, cublas, 0));
    ASSERT_OK(lb->forward_train(scratch, io, nullptr, cublas, 0));
    ASSERT_OK(lb->loss_nmse(scratch, io, sums_b.ptr, dt.ptr, 0));
    ASSERT_OK(lb->backward_nmse(scratch, io, sums_b.ptr, scale, dt.ptr, cublas, 0));
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
      std::printf("  %s: fused vs unfused d%-9s nmse %.2e\n", to_string(mix).c_str(), slot.name.c_str(), e);
      EXPECT_LT(e, 1e-8) << to_string(mix) << " " << slot.name;
    }
  }
}

}  // namespace
}  // namespace golinear::mixers::cuda
