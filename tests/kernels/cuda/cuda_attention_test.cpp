// The GPU attention (kernels/cuda/attention.h) against the CPU specification
// (kernels/cpu/attention.h): forward y and lse, backward dq, dk, dv, over the masks the project
// uses {full causal, 8 sinks + 56 window, 0 sinks + 64 window, 8 sinks only}, T in
// {1, 63, 64, 65, 200, 1000} (block edges; the sink keys' dk/dv in query chunks from T = 65),
// GQA H/G in {1, 4} and D in {64, 128}. Normalized MSE, NaN/Inf, guard values after every output
// (outputs are poisoned with 0xFF bytes — NaN in bf16 and fp32 — so an unwritten element fails
// the finite check and a write past the end changes a guard), and a bitwise-determinism check of
// the backward.
// Label `gpu`: CI (no GPU) skips them with `ctest -LE gpu`.
//
// Tolerances. Inputs are bf16-rounded before the CPU runs, so the differences come from the
// GPU's bf16 operands of the tensor cores: P (forward and backward), y (bf16 output, also used for
// D = rowsum(dy ∘ y) in the backward), dy and dS (bf16 for the matrix products). Each rounding is
// relative 2^-9, i.e. NMSE ~4e-6 per rounded factor; a few chained factors give ~1e-5 (forward)
// and, with the cancellation in dP − D, ~1e-4 (backward). Thresholds: 2e-4 forward, 2e-3
// backward (measured values are printed), lse: absolute 1e-3 (fp32 sums of up to 1000 terms).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cuda/attention.h"
#include "cuda_test_util.h"

namespace golinear::kernels::cuda {
namespace {

using namespace ::golinear::kernels::test;

// expect_close without fatal failures: counts the non-finite values, returns the NMSE.
double check_close(const std::vector<float>& got, const std::vector<float>& want, double nmse_tol,
                   const std::string& what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  EXPECT_EQ(count_nonfinite(got), 0u) << what << ": non-finite values";
  const Comparison e = compare(got, want);
  EXPECT_LT(e.nmse, nmse_tol) << what << ": nmse " << e.nmse << " max abs " << e.max_abs;
  std::printf("  %-44s nmse %.3e  max abs %.3e\n", what.c_str(), e.nmse, e.max_abs);
  return e.nmse;
}

// lse of each (t, h) row in double, as the specification's softmax normalizer.
std::vector<float> lse_reference(const std::vector<float>& q, const std::vector<float>& k, int T,
                                 int H, int G, int D, cpu::AttentionMask mask) {
  std::vector<float> out((size_t)T * H);
  const double scale = 1.0 / std::sqrt((double)D);
  std::vector<double> s(T);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      const int g = h / (H / G);
      double mx = -INFINITY;
      for (int j = 0; j <= t; ++j) {
        if (!mask.allows(t, j)) continue;
        double acc = 0;
        for (int d = 0; d < D; ++d)
          acc += (double)q[((size_t)t * H + h) * D + d] * k[((size_t)j * G + g) * D + d];
        s[j] = acc * scale;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (int j = 0; j <= t; ++j)
        if (mask.allows(t, j)) sum += std::exp(s[j] - mx);
      out[(size_t)t * H + h] = (float)(mx + std::log(sum));
    }
  return out;
}

struct Case {
  int T, H, G, D, sinks, window;
  std::string name() const {
    char b[128];
    std::snprintf(b, sizeof b, "T=%d H=%d G=%d D=%d sinks=%d window=%d", T, H, G, D, sinks, window);
    return b;
  }
};

void run_case(const Case& c) {
  SCOPED_TRACE(c.name());
  std::printf("%s\n", c.name().c_str());
  const int T = c.T, H = c.H, G = c.G, D = c.D;
  const uint64_t seed = 1000 * T + 10 * H + D + c.window + 7 * c.sinks;
  auto q = random_floats((size_t)T * H * D, seed + 1, -2, 2);
  auto k = random_floats((size_t)T * G * D, seed + 2, -2, 2);
  auto v = random_floats((size_t)T * G * D, seed + 3, -1, 1);
  auto dy = random_floats((size_t)T * H * D, seed + 4, -1, 1);
  round_bf16(q), round_bf16(k), round_bf16(v);
  const cpu::AttentionMask mask{c.sinks, c.window};
  const AttentionMaskSpec spec{c.sinks, c.window};

  // CPU: the one-query-at-a-time specification up to T = 200, the blocked form (tested against
  // it in tests/kernels) beyond.
  std::vector<float> y_ref((size_t)T * H * D), dq_ref(q.size(), 0.0f), dk_ref(k.size(), 0.0f),
      dv_ref(v.size(), 0.0f);
  if (T <= 200) {
    cpu::attention_forward_reference(y_ref.data(), q.data(), k.data(), v.data(), T, T, 0, H, G, D, mask);
    cpu::attention_backward_reference(dq_ref.data(), dk_ref.data(), dv_ref.data(), dy.data(),
                                      q.data(), k.data(), v.data(), T, H, G, D, mask);
  } else {
    cpu::attention_forward(y_ref.data(), q.data(), k.data(), v.data(), T, T, 0, H, G, D, mask);
    cpu::attention_backward(dq_ref.data(), dk_ref.data(), dv_ref.data(), dy.data(), q.data(),
                            k.data(), v.data(), T, H, G, D, mask);
  }
  const auto lse_ref = lse_reference(q, k, T, H, G, D, mask);

  DevB q_d(q.size()), k_d(k.size()), v_d(v.size()), y_d(y_ref.size()), y2_d(y_ref.size());
  DevF lse_d((size_t)T * H), dy_d(dy.size());
  q_d.upload(q), k_d.upload(k), v_d.upload(v), dy_d.upload(dy);
  ASSERT_OK(attention_forward(y_d.ptr, lse_d.ptr, q_d.ptr, k_d.ptr, v_d.ptr, T, H, G, D, spec, nullptr));
  // Without lse: the same y.
  ASSERT_OK(attention_forward(y2_d.ptr, nullptr, q_d.ptr, k_d.ptr, v_d.ptr, T, H, G, D, spec, nullptr));
  const auto y = y_d.download();
  check_close(y, y_ref, 2e-4, "forward y");
  EXPECT_EQ(y_d.raw(), y2_d.raw()) << "forward without lse differs";
  const auto lse = lse_d.download();
  double lse_err = 0;
  for (size_t i = 0; i < lse.size(); ++i) {
    ASSERT_TRUE(std::isfinite(lse[i])) << "lse " << i;
    lse_err = std::max(lse_err, (double)std::abs(lse[i] - lse_ref[i]));
  }
  EXPECT_LT(lse_err, 1e-3) << "lse max abs error";
  std::printf("  %-44s max abs %.3e\n", "forward lse", lse_err);

  const size_t ws_bytes = attention_backward_workspace_bytes(T, H, G, D);
  DevB ws_d(ws_bytes / 2 + 1);
  DevF dq_d(q.size()), dk_d(k.size()), dv_d(v.size());
  ASSERT_OK(attention_backward(dq_d.ptr, dk_d.ptr, dv_d.ptr, dy_d.ptr, y_d.ptr, lse_d.ptr, q_d.ptr,
                               k_d.ptr, v_d.ptr, T, H, G, D, spec, ws_d.ptr, ws_bytes, nullptr));
  // With T = 1 every row sees one key, so the exact dq and dk are zero (softmax of one score)
  // and NMSE is undefined; what remains is rounding: dS = P (dP − D) with dP from bf16 dy,
  // |dS| ≲ 2^-8 |dy·v| ≈ 2^-8 · 0.33 · √D, times |k|/√D: ~2e-3 for these inputs. Bound 1e-2.
  auto expect_grad = [&](const std::vector<float>& got, const std::vector<float>& want,
                         const char* what) {
    if (T > 1) return (void)check_close(got, want, 2e-3, what);
    double mx = 0;
    for (float x : got) {
      EXPECT_TRUE(std::isfinite(x)) << what;
      mx = std::max(mx, (double)std::abs(x));
    }
    EXPECT_LT(mx, 1e-2) << what << " (exactly 0 for T = 1)";
    std::printf("  %-44s max abs %.3e (exact: 0)\n", what, mx);
  };
  expect_grad(dq_d.download(), dq_ref, "backward dq");
  expect_grad(dk_d.download(), dk_ref, "backward dk");
  check_close(dv_d.download(), dv_ref, 2e-3, "backward dv");
  // Deterministic: a second call (over poisoned outputs) gives the same bits.
  const auto dq1 = dq_d.raw(), dk1 = dk_d.raw(), dv1 = dv_d.raw();
  ASSERT_EQ(cudaMemset(dq_d.ptr, 0xFF, q.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(dk_d.ptr, 0xFF, k.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(dv_d.ptr, 0xFF, v.size() * 4), cudaSuccess);
  ASSERT_OK(attention_backward(dq_d.ptr, dk_d.ptr, dv_d.ptr, dy_d.ptr, y_d.ptr, lse_d.ptr, q_d.ptr,
                               k_d.ptr, v_d.ptr, T, H, G, D, spec, ws_d.ptr, ws_bytes, nullptr));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(dq1 == dq_d.raw() && dk1 == dk_d.raw() && dv1 == dv_d.raw()) << "backward not deterministic";
  // A workspace one byte short is refused.
  EXPECT_FALSE(attention_backward(dq_d.ptr, dk_d.ptr, dv_d.ptr, dy_d.ptr, y_d.ptr, lse_d.ptr,
                                  q_d.ptr, k_d.ptr, v_d.ptr, T, H, G, D, spec, ws_d.ptr,
                                  ws_bytes - 1, nullptr).ok());
}

void run_all(int D) {
  const int masks[4][2] = {{0, -1}, {8, 56}, {0, 64}, {8, 0}};
  const int gqa[2][2] = {{2, 2}, {8, 2}};  // H/G = 1 and 4
  for (const auto& m : masks)
    for (int T : {1, 63, 64, 65, 200, 1000})
      for (const auto& hg : gqa) run_case({T, hg[0], hg[1], D, m[0], m[1]});
}

TEST(CudaAttentionFlash, ForwardBackwardMatchCpuD64) {
  REQUIRE_GPU();
  run_all(64);
}
TEST(CudaAttentionFlash, ForwardBackwardMatchCpuD128) {
  REQUIRE_GPU();
  run_all(128);
}
// Full causal over many 128-query blocks (the warpgroup kernel: a two-stage K/V ring wrapping
// several times, a last block past T), GQA 2.
TEST(CudaAttentionFlash, LongCausal) {
  REQUIRE_GPU();
  run_case({2500, 4, 2, 128, 0, -1});
  run_case({1500, 2, 1, 64, 0, -1});
}
// More than 64 sinks: several sink blocks, the sink part's direct (unchunked) path.
TEST(CudaAttentionFlash, ManySinksD128) {
  REQUIRE_GPU();
  run_case({700, 4, 1, 128, 100, 30});
}

// attention_forward_mixed (the hybrid's exact branch with the mix gate in its epilogue) against
// attention_forward followed by the mix on the host: y = (1 − λ) bf16(attn) + λ y_lin, y_lin read
// from y for rows ≥ lin_from only (rows before hold NaN here and must not be read). The only
// difference is fp32 contraction of the mix before the bf16 rounding: NMSE bound 1e-5.
TEST(CudaAttentionFlash, MixedEpilogueMatchesForwardThenMix) {
  REQUIRE_GPU();
  const int T = 300, H = 8, G = 2, D = 128, lin_from = 64;
  auto q = random_floats((size_t)T * H * D, 11, -2, 2), k = random_floats((size_t)T * G * D, 12, -2, 2),
       v = random_floats((size_t)T * G * D, 13, -1, 1), y_lin = random_floats((size_t)T * H * D, 14, -1, 1),
       lambda = random_floats((size_t)T * H, 15, 0, 1);
  round_bf16(q), round_bf16(k), round_bf16(v), round_bf16(y_lin);
  const AttentionMaskSpec spec{8, 56};
  DevB q_d(q.size()), k_d(k.size()), v_d(v.size()), attn_d(q.size()), y_d(q.size());
  DevF lambda_d(lambda.size());
  q_d.upload(q), k_d.upload(k), v_d.upload(v), lambda_d.upload(lambda);
  // y holds y_lin from row lin_from on; the rows before stay poisoned (NaN).
  ASSERT_EQ(cudaMemcpy(y_d.ptr + (size_t)lin_from * H * D, DevB::from_float_vec(y_lin).data() + (size_t)lin_from * H * D,
                       (size_t)(T - lin_from) * H * D * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_OK(attention_forward(attn_d.ptr, nullptr, q_d.ptr, k_d.ptr, v_d.ptr, T, H, G, D, spec, nullptr));
  ASSERT_OK(attention_forward_mixed(y_d.ptr, lambda_d.ptr, lin_from, q_d.ptr, k_d.ptr, v_d.ptr, T,
                                    H, G, D, spec, nullptr));
  const auto attn = attn_d.download();
  std::vector<float> want(attn.size());
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      const float l = lambda[(size_t)t * H + h];
      for (int d = 0; d < D; ++d) {
        const size_t i = ((size_t)t * H + h) * D + d;
        const float lin = t >= lin_from ? y_lin[i] : 0.0f;
        want[i] = __bfloat162float(__float2bfloat16((1.0f - l) * attn[i] + l * lin));
      }
    }
  check_close(y_d.download(), want, 1e-5, "mixed epilogue vs forward + mix");
}

}  // namespace
}  // namespace golinear::kernels::cuda
