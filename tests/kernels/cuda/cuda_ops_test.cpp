// One table of GPU ops against their CPU references, in the manner of ggml's test-backend-ops:
// every row names an op family of kernels/cuda, a function that runs the GPU op and its CPU
// reference (kernels/cpu, train/optimizer.cpp; the few ops without a CPU function restate their
// formula here, naming where it lives) on random inputs of one shape, and the tolerances of its
// forward and backward outputs. One loop runs every row over every shape: T ∈ {1, 37, 130, 300}
// (odd lengths, one token, several 64-token chunks), head dim 64 and 128, GQA (H = 4 query heads
// over G = 2 kv heads). Each output is checked for NaN/Inf, by normalized MSE
// Σ(got − want)² / Σwant² and by max-abs error relative to the reference's largest magnitude, and
// its device buffer's guards (0xFF bytes on both sides, cuda_test_util.h Dev) must be untouched.
// Label `gpu`: CI (no GPU) skips it with `ctest -LE gpu`. Measured errors are printed.
//
// Tolerances, from bf16's unit roundoff u = 2^-8 (an 8-bit significand: rounding moves a value by
// at most u of itself). Inputs are bf16-rounded before the CPU runs, so the differences come from
// the GPU's bf16 outputs and intermediates:
//   kOneRounding   each output rounded to bf16 once: NMSE ≈ u²/3 (bound 2u²); an fp32 difference
//                  in the last place may move a value across a rounding boundary, one bf16 step
//                  2u (bound 4u of the largest value, with what rounded before it).
//   kFp32          fp32 outputs of the same formula, sums in another order or in fp64: a few fp32
//                  ulps (2^-24) apart, far below NMSE 1e-10 and 1e-5 of the largest value.
//   kExact         copies and single IEEE operations done alike on both sides (embedding rows,
//                  argmax indices, conversions, adds).
//   kAttention*    P and y rounded (forward), also dy and dS as tensor-core operands (backward):
//                  a few chained roundings, NMSE 16u² ≈ 2.4e-4 forward and 128u² ≈ 2e-3
//                  backward (as cuda_attention_test.cpp; measured ~1e-5 and ~1e-4).
//   kGatedDelta*   about ten roundings chained along a chunk's products (W, U, Ũ, P, the bf16
//                  state copies), carried across chunks by the state: NMSE 64u² ≈ 1e-3 (measured
//                  on H200 at most 1.4e-5 forward, 2.3e-5 backward: cuda_gated_delta_test.cpp).
//   The max-abs bounds of the chained ops allow one value at the end of the chain to be off by
//   8 … 32 bf16 steps of the largest value (rounding errors of a long sum align in the worst row).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/gated_delta.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/short_conv.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gated_delta.h"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/optimizer.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/short_conv.h"
#include "train/optimizer.h"

namespace golinear::kernels::cuda {
namespace {

using namespace ::golinear::kernels::test;

// ---- the comparison ---------------------------------------------------------------------------

// NMSE ≤ nmse and max |got − want| ≤ max_rel · max |want|.
struct Tolerance {
  double nmse, max_rel;
};
constexpr double u = 1.0 / 256;  // bf16's unit roundoff
constexpr Tolerance kOneRounding{2 * u * u, 4 * u};
constexpr Tolerance kFp32{1e-10, 1e-5};
constexpr Tolerance kExact{0, 0};
constexpr Tolerance kAttentionForward{16 * u * u, 16 * u};
constexpr Tolerance kAttentionBackward{128 * u * u, 32 * u};
constexpr Tolerance kGatedDeltaForward{64 * u * u, 32 * u};
constexpr Tolerance kGatedDeltaBackward{64 * u * u, 64 * u};
constexpr Tolerance kNone{0, 0};  // the op has no such outputs

// One tensor to compare: what the GPU wrote (downloaded through Dev, guards checked) and what the
// CPU reference computed; `backward` picks the row's backward tolerance.
struct Check {
  std::string name;
  std::vector<float> got, want;
  bool backward = false;
  // The magnitude that rounding acts on where the reference itself can be 0: e.g. attention's dq
  // and dk at T = 1 (one key: the softmax is constant, its gradient exactly 0), where the GPU's
  // are the bf16 rounding of dP − D ≈ |dy|·|v|·2^-8. 0: the reference's own largest value.
  double floor = 0;
};

struct Shape {
  int T, H, G, D;
};

using Runner = void (*)(const Shape&, std::vector<Check>&);

struct OpCase {
  const char* name;
  Runner run;
  Tolerance forward, backward;  // backward: unused when the op has none
};
void PrintTo(const OpCase& op, std::ostream* os) { *os << op.name; }  // gtest's test listing

void expect_matches(const Check& c, const Tolerance& tol) {
  SCOPED_TRACE(c.name);
  ASSERT_EQ(c.got.size(), c.want.size());
  EXPECT_EQ(count_nonfinite(c.want), 0u) << "the reference is not finite";
  EXPECT_EQ(count_nonfinite(c.got), 0u) << "non-finite values (or elements left unwritten)";
  const Comparison e = compare(c.got, c.want);
  const double scale = std::max(max_abs(c.want), c.floor);
  if (max_abs(c.want) > 0) {
    EXPECT_LE(e.nmse, tol.nmse) << "max abs " << e.max_abs;
  }
  EXPECT_LE(e.max_abs, tol.max_rel * scale) << "nmse " << e.nmse << ", reference max " << scale;
  std::printf("    %-30s nmse %.3e  max abs %.3e  (reference max %.3e)\n", c.name.c_str(), e.nmse,
              e.max_abs, scale);
}

// ---- inputs -----------------------------------------------------------------------------------

uint64_t seed_of(const Shape& s) { return 100000ull * s.T + 1000ull * s.H + 10ull * s.G + s.D; }

std::vector<float> random_bf16(size_t n, uint64_t seed, float lo, float hi) {
  std::vector<float> v = random_floats(n, seed, lo, hi);
  round_bf16(v);
  return v;
}

std::vector<float> zeros(size_t n) { return std::vector<float>(n, 0.0f); }

// ---- the ops: GPU op and CPU reference on one shape ------------------------------------------

// RMSNorm over rows of C = H·D: bf16 and fp32 inputs; its input gradient written (=) and added
// (+=) onto a base.
void run_norm(const Shape& s, std::vector<Check>& checks) {
  const int N = s.T, C = s.H * s.D;
  const float eps = 1e-6f;
  const uint64_t seed = seed_of(s);
  const auto x = random_bf16((size_t)N * C, seed, -2, 2);
  const auto x32 = random_floats((size_t)N * C, seed + 1, -2, 2);
  const auto w = random_floats(C, seed + 2, 0.5f, 1.5f);
  const auto dy = random_floats((size_t)N * C, seed + 3, -1, 1);
  const auto base = random_floats((size_t)N * C, seed + 4, -1, 1);
  std::vector<float> y_ref(x.size()), y32_ref(x.size()), dx_ref = zeros(x.size());
  cpu::rmsnorm_forward(y_ref.data(), x.data(), w.data(), N, C, eps);
  cpu::rmsnorm_forward(y32_ref.data(), x32.data(), w.data(), N, C, eps);
  cpu::rmsnorm_backward(dx_ref.data(), nullptr, dy.data(), x32.data(), w.data(), N, C, eps);
  std::vector<float> dx_acc_ref = base;
  for (size_t i = 0; i < base.size(); ++i) dx_acc_ref[i] += dx_ref[i];

  DevB x_d(x), y_d(x.size()), y32_d(x.size());
  DevF x32_d(x32), w_d(w), dy_d(dy), dx_d(x.size()), dx_acc_d(base);
  ASSERT_OK(rmsnorm_forward(y_d.ptr, x_d.ptr, w_d.ptr, N, C, eps, nullptr));
  ASSERT_OK(rmsnorm_f32_forward(y32_d.ptr, x32_d.ptr, w_d.ptr, N, C, eps, nullptr));
  ASSERT_OK(
      rmsnorm_backward_f32(dx_d.ptr, false, dy_d.ptr, x32_d.ptr, w_d.ptr, N, C, eps, nullptr));
  ASSERT_OK(
      rmsnorm_backward_f32(dx_acc_d.ptr, true, dy_d.ptr, x32_d.ptr, w_d.ptr, N, C, eps, nullptr));
  checks.push_back({"rmsnorm y", y_d.download(), y_ref});
  checks.push_back({"rmsnorm y (fp32 input)", y32_d.download(), y32_ref});
  checks.push_back({"rmsnorm dx (=)", dx_d.download(), dx_ref, true});
  checks.push_back({"rmsnorm dx (+=)", dx_acc_d.download(), dx_acc_ref, true});
  // fp32 input at model widths: the row in registers as 4 and 8 float4s a thread (4,096, 8,192),
  // and a width of no 16-byte rows (the strided loop).
  for (const int Cw : {4096, 8192, 4093}) {
    const int Nw = std::min(N, 3);
    const auto xw = random_floats((size_t)Nw * Cw, seed + 5, -2, 2);
    const auto ww = random_floats(Cw, seed + 6, 0.5f, 1.5f);
    std::vector<float> yw_ref(xw.size());
    cpu::rmsnorm_forward(yw_ref.data(), xw.data(), ww.data(), Nw, Cw, eps);
    DevF xw_d(xw), ww_d(ww);
    DevB yw_d(xw.size());
    ASSERT_OK(rmsnorm_f32_forward(yw_d.ptr, xw_d.ptr, ww_d.ptr, Nw, Cw, eps, nullptr));
    checks.push_back({"rmsnorm y (fp32 input, C=" + std::to_string(Cw) + ")", yw_d.download(), yw_ref});
  }
}

// Unit-norm rows of D (the linear branch's q̂, k̂; mixers/hybrid_mixer.cpp): y = x / sqrt(‖x‖² +
// 1e-6), dx = inv·dy − inv³ (x·dy) x, restated here in fp64.
void run_unit_rows(const Shape& s, std::vector<Check>& checks) {
  const long rows = (long)s.T * s.H;
  const int D = s.D;
  const uint64_t seed = seed_of(s);
  const auto x = random_bf16((size_t)rows * D, seed, -1, 1);
  const auto dy = random_floats((size_t)rows * D, seed + 1, -1, 1);
  std::vector<float> y_ref = x, dx_ref(x.size());
  unit_rows(y_ref, D);
  for (long r = 0; r < rows; ++r) {
    double ss = 0, dot = 0;
    for (int d = 0; d < D; ++d) {
      ss += (double)x[r * D + d] * x[r * D + d];
      dot += (double)x[r * D + d] * dy[r * D + d];
    }
    const double inv = 1.0 / std::sqrt(ss + 1e-6);
    for (int d = 0; d < D; ++d)
      dx_ref[r * D + d] = (float)(inv * dy[r * D + d] - inv * inv * inv * dot * x[r * D + d]);
  }
  DevB x_d(x), y_d(x.size());
  DevF dy_d(dy), dx_d(x.size());
  ASSERT_OK(unit_rows_forward(y_d.ptr, x_d.ptr, rows, D, nullptr));
  ASSERT_OK(unit_rows_backward(dx_d.ptr, dy_d.ptr, x_d.ptr, rows, D, nullptr));
  checks.push_back({"unit rows y", y_d.download(), y_ref});
  checks.push_back({"unit rows dx", dx_d.download(), dx_ref, true});
}

// RoPE at an offset position: the bf16 rotation forward (sign 1) and backward (sign −1), and the
// backward added onto fp32 gradients.
void run_rope(const Shape& s, std::vector<Check>& checks) {
  const int T = s.T, N = s.H, D = s.D;
  const long pos0 = 5;
  const uint64_t seed = seed_of(s);
  const auto x = random_bf16((size_t)T * N * D, seed, -1, 1);
  const auto inv_freq = random_floats(D / 2, seed + 1, 1e-4f, 1.0f);
  const auto src = random_floats(x.size(), seed + 2, -1, 1);
  const auto base = random_floats(x.size(), seed + 3, -1, 1);
  std::vector<float> fwd_ref = x, bwd_ref = x, add_ref = src;
  cpu::rope_forward(fwd_ref.data(), inv_freq.data(), T, N, D, pos0);
  cpu::rope_backward(bwd_ref.data(), inv_freq.data(), T, N, D, pos0);
  cpu::rope_backward(add_ref.data(), inv_freq.data(), T, N, D, pos0);
  for (size_t i = 0; i < base.size(); ++i) add_ref[i] += base[i];
  DevB fwd_d(x), bwd_d(x);
  DevF inv_d(inv_freq), src_d(src), add_d(base);
  ASSERT_OK(rope_apply(fwd_d.ptr, inv_d.ptr, T, N, D, pos0, 1, nullptr));
  ASSERT_OK(rope_apply(bwd_d.ptr, inv_d.ptr, T, N, D, pos0, -1, nullptr));
  ASSERT_OK(rope_backward_add_f32(add_d.ptr, src_d.ptr, inv_d.ptr, T, N, D, pos0, nullptr));
  checks.push_back({"rope (sign 1)", fwd_d.download(), fwd_ref});
  checks.push_back({"rope (sign -1)", bwd_d.download(), bwd_ref, true});
  checks.push_back({"rope backward (+=, fp32)", add_d.download(), add_ref, true});
}

// The short conv over N = G·D channels: y; dx (=), dw (+= onto a base), dw alone (dx null); a
// workspace one float short is refused.
void run_short_conv(const Shape& s, std::vector<Check>& checks) {
  const int T = s.T, N = s.G * s.D;
  const uint64_t seed = seed_of(s);
  const auto x = random_bf16((size_t)T * N, seed, -1, 1);
  const auto w = random_floats((size_t)N * 4, seed + 1, -1, 1);
  const auto dy = random_floats((size_t)T * N, seed + 2, -1, 1);
  const auto dw0 = random_floats((size_t)N * 4, seed + 3, -1, 1);
  std::vector<float> y_ref(x.size()), dx_ref = zeros(x.size()), dw_ref = dw0;
  cpu::short_conv_forward<float>(y_ref.data(), x.data(), w.data(), T, N);
  cpu::short_conv_backward<float>(dx_ref.data(), dw_ref.data(), dy.data(), x.data(), w.data(), T,
                                  N);
  DevB x_d(x), y_d(x.size());
  DevF w_d(w), dy_d(dy), dx_d(x.size()), dw_d(dw0), dw_only_d(dw0);
  const size_t ws_bytes = short_conv_backward_workspace_bytes(T, N);
  DevF ws(ws_bytes / sizeof(float));
  ASSERT_OK(short_conv_forward(y_d.ptr, x_d.ptr, w_d.ptr, T, N, nullptr));
  ASSERT_OK(short_conv_backward(dx_d.ptr, dw_d.ptr, dy_d.ptr, x_d.ptr, w_d.ptr, T, N, ws.ptr,
                                ws_bytes, nullptr));
  ASSERT_OK(short_conv_backward(nullptr, dw_only_d.ptr, dy_d.ptr, x_d.ptr, w_d.ptr, T, N, ws.ptr,
                                ws_bytes, nullptr));
  EXPECT_FALSE(short_conv_backward(dx_d.ptr, dw_d.ptr, dy_d.ptr, x_d.ptr, w_d.ptr, T, N, ws.ptr,
                                   ws_bytes - sizeof(float), nullptr)
                   .ok());
  checks.push_back({"short conv y", y_d.download(), y_ref});
  checks.push_back({"short conv dx", dx_d.download(), dx_ref, true});
  checks.push_back({"short conv dw (+=)", dw_d.download(), dw_ref, true});
  checks.push_back({"short conv dw, no dx", dw_only_d.download(), dw_ref, true});
}

// The fused input stage over H heads: the CPU conv rounded to bf16 (as the GPU stores it), then
// its RoPE from position 0 and its unit rows.
void run_conv_rope_unit(const Shape& s, std::vector<Check>& checks) {
  const int T = s.T, heads = s.H, D = s.D, N = heads * D;
  const uint64_t seed = seed_of(s);
  const auto x = random_bf16((size_t)T * N, seed, -1, 1);
  const auto w = random_floats((size_t)N * 4, seed + 1, -1, 1);
  const auto inv_freq = random_floats(D / 2, seed + 2, 1e-4f, 1.0f);
  std::vector<float> conv_ref(x.size());
  cpu::short_conv_forward<float>(conv_ref.data(), x.data(), w.data(), T, N);
  round_bf16(conv_ref);
  std::vector<float> rope_ref = conv_ref, unit_ref = conv_ref;
  cpu::rope_forward(rope_ref.data(), inv_freq.data(), T, heads, D, 0);
  unit_rows(unit_ref, D);
  DevB x_d(x), conv_d(x.size()), rope_d(x.size()), unit_d(x.size());
  DevF w_d(w), inv_d(inv_freq), table_d((size_t)T * D);  // (T, D/2) float2
  auto* table = reinterpret_cast<float2*>(table_d.ptr);
  ASSERT_OK(rope_table(table, inv_d.ptr, T, D, 0, nullptr));
  ASSERT_OK(conv_rope_unit_forward(conv_d.ptr, rope_d.ptr, unit_d.ptr, x_d.ptr, w_d.ptr, table, T,
                                   heads, D, nullptr));
  checks.push_back({"fused conv", conv_d.download(), conv_ref});
  checks.push_back({"fused conv -> rope", rope_d.download(), rope_ref});
  checks.push_back({"fused conv -> unit rows", unit_d.download(), unit_ref});
}

// SwiGLU on separate gate/up tensors and on the stacked [gate; up] rows, and the stacked form's
// backward (dgu rows = [dgate | dup]).
void run_activation(const Shape& s, std::vector<Check>& checks) {
  const int T = s.T, F = s.H * s.D;
  const long n = (long)T * F;
  const uint64_t seed = seed_of(s);
  const auto gate = random_bf16(n, seed, -4, 4), up = random_bf16(n, seed + 1, -2, 2);
  const auto dact = random_floats(n, seed + 2, -1, 1);
  std::vector<float> gu((size_t)2 * n);
  for (int t = 0; t < T; ++t)
    for (int f = 0; f < F; ++f) {
      gu[(size_t)t * 2 * F + f] = gate[(size_t)t * F + f];
      gu[(size_t)t * 2 * F + F + f] = up[(size_t)t * F + f];
    }
  std::vector<float> y_ref(n), dgate = zeros(n), dup = zeros(n), dgu_ref(gu.size());
  cpu::swiglu_forward(y_ref.data(), gate.data(), up.data(), n);
  cpu::swiglu_backward(dgate.data(), dup.data(), dact.data(), gate.data(), up.data(), n);
  for (int t = 0; t < T; ++t)
    for (int f = 0; f < F; ++f) {
      dgu_ref[(size_t)t * 2 * F + f] = dgate[(size_t)t * F + f];
      dgu_ref[(size_t)t * 2 * F + F + f] = dup[(size_t)t * F + f];
    }
  DevB gate_d(gate), up_d(up), gu_d(gu), y_d(n), y_stacked_d(n), dgu_d(gu.size());
  DevF dact_d(dact);
  ASSERT_OK(swiglu_forward(y_d.ptr, gate_d.ptr, up_d.ptr, n, nullptr));
  ASSERT_OK(swiglu_stacked(y_stacked_d.ptr, gu_d.ptr, T, F, nullptr));
  ASSERT_OK(swiglu_stacked_backward(dgu_d.ptr, dact_d.ptr, gu_d.ptr, T, F, nullptr));
  checks.push_back({"swiglu", y_d.download(), y_ref});
  checks.push_back({"swiglu stacked", y_stacked_d.download(), y_ref});
  checks.push_back({"swiglu stacked dgu", dgu_d.download(), dgu_ref, true});
}

// Rows of a (V, C) bf16 table gathered into fp32 (model/transformer.cpp's embedding lookup).
void run_embedding(const Shape& s, std::vector<Check>& checks) {
  const int T = s.T, C = s.H * s.D, V = 97;
  const uint64_t seed = seed_of(s);
  const auto table = random_bf16((size_t)V * C, seed, -1, 1);
  std::vector<float> ids(T), h_ref((size_t)T * C);
  for (int t = 0; t < T; ++t) {
    ids[t] = (float)((t * 31 + 7) % V);
    for (int c = 0; c < C; ++c) h_ref[(size_t)t * C + c] = table[(size_t)ids[t] * C + c];
  }
  DevB table_d(table);
  Dev<int32_t> ids_d(ids);
  DevF h_d(h_ref.size());
  ASSERT_OK(embed_gather(h_d.ptr, table_d.ptr, ids_d.ptr, T, C, nullptr));
  checks.push_back({"embedding rows", h_d.download(), h_ref});
}

// The first maximum of each fp32 row (greedy decoding), ties planted at the front; rows of V % 4
// != 0 (the scalar scan) and of 16-byte rows long enough for two passes of the float4 scan.
void run_argmax(const Shape& s, std::vector<Check>& checks) {
  for (const int V : {s.H * s.D + 3, 64 * s.H * s.D + 4}) {
    const int R = V > 4096 ? std::min(s.T, 3) : s.T;
    auto x = random_floats((size_t)R * V, seed_of(s), -1, 1);
    std::vector<float> want(R);
    for (int r = 0; r < R; ++r) {
      float* row = x.data() + (size_t)r * V;
      row[(r * 13 + (V > 4096 ? V / 2 : 0)) % V] = 2.0f;  // the first of two equal maxima
      row[(r * 13 + 5 + (V > 4096 ? V / 2 : 0)) % V] = 2.0f;
      int best = 0;
      for (int i = 1; i < V; ++i)
        if (row[i] > row[best]) best = i;
      want[r] = (float)best;
    }
    DevF x_d(x);
    Dev<int32_t> out_d(R);
    ASSERT_OK(argmax_rows(out_d.ptr, x_d.ptr, R, V, nullptr));
    checks.push_back({V % 4 ? "argmax rows" : "argmax rows, float4 scan", out_d.download(), want});
  }
}

// The conversions and adds between the ops, exact: fp32 → bf16, a += b, the hi + lo bf16 pair
// of an fp32 value, x += bias per row, and the packing of dq, dk, dv into one bf16 row.
void run_conversion(const Shape& s, std::vector<Check>& checks) {
  const int T = s.T, HD = s.H * s.D, GD = s.G * s.D, W = HD + 2 * GD;
  const long n = (long)T * HD;
  const uint64_t seed = seed_of(s);
  const auto a = random_floats(n, seed, -3, 3), b = random_floats(n, seed + 1, -3, 3);
  const auto bias = random_floats(HD, seed + 2, -1, 1);
  const auto dq = random_floats(n, seed + 3, -1, 1),
             dk = random_floats((size_t)T * GD, seed + 4, -1, 1),
             dv = random_floats((size_t)T * GD, seed + 5, -1, 1);
  std::vector<float> bf16_ref(n), sum_ref(n), hi_ref(n), lo_ref(n), bias_ref(n),
      pack_ref((size_t)T * W);
  for (long i = 0; i < n; ++i) {
    bf16_ref[i] = bf16_round(a[i]);
    sum_ref[i] = a[i] + b[i];
    hi_ref[i] = bf16_round(a[i]);
    lo_ref[i] = bf16_round(a[i] - hi_ref[i]);
    bias_ref[i] = a[i] + bias[i % HD];
  }
  for (int t = 0; t < T; ++t)
    for (int c = 0; c < W; ++c)
      pack_ref[(size_t)t * W + c] = bf16_round(c < HD        ? dq[(size_t)t * HD + c]
                                               : c < HD + GD ? dk[(size_t)t * GD + c - HD]
                                                             : dv[(size_t)t * GD + c - HD - GD]);
  DevF a_d(a), b_d(b), sum_d(a), bias_d(bias), with_bias_d(a), dq_d(dq), dk_d(dk), dv_d(dv);
  DevB bf16_d(n), hi_d(n), lo_d(n), pack_d(pack_ref.size());
  ASSERT_OK(convert_f32_to_bf16(bf16_d.ptr, a_d.ptr, n, nullptr));
  ASSERT_OK(add_f32(sum_d.ptr, b_d.ptr, n, nullptr));
  ASSERT_OK(split_f32_to_bf16_pair(hi_d.ptr, lo_d.ptr, a_d.ptr, n, nullptr));
  ASSERT_OK(add_bias_rows(with_bias_d.ptr, bias_d.ptr, T, HD, nullptr));
  ASSERT_OK(pack_qkv_grad_bf16(pack_d.ptr, dq_d.ptr, dk_d.ptr, dv_d.ptr, T, HD, GD, nullptr));
  checks.push_back({"fp32 -> bf16", bf16_d.download(), bf16_ref});
  checks.push_back({"a += b", sum_d.download(), sum_ref});
  checks.push_back({"bf16 pair hi", hi_d.download(), hi_ref});
  checks.push_back({"bf16 pair lo", lo_d.download(), lo_ref});
  checks.push_back({"x += bias rows", with_bias_d.download(), bias_ref});
  checks.push_back({"pack dq | dk | dv", pack_d.download(), pack_ref, true});
}

// One fused [q; k; v] projection (T, H·D + 2·G·D) fp32 split into bf16 heads with its bias and
// Qwen3's per-head RMSNorm of q and k (kernels/cpu/norm.h over rows of D).
void run_qkv_split(const Shape& s, std::vector<Check>& checks) {
  const int T = s.T, H = s.H, G = s.G, D = s.D, R = H + 2 * G, W = R * D;
  const float eps = 1e-6f;
  const uint64_t seed = seed_of(s);
  const auto qkv = random_floats((size_t)T * W, seed, -2, 2),
             bias = random_floats(W, seed + 1, -1, 1);
  const auto q_norm = random_floats(D, seed + 2, 0.5f, 1.5f),
             k_norm = random_floats(D, seed + 3, 0.5f, 1.5f);
  std::vector<float> q_ref((size_t)T * H * D), k_ref((size_t)T * G * D), v_ref((size_t)T * G * D);
  std::vector<float> row(D);
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) {
      for (int d = 0; d < D; ++d) row[d] = qkv[(size_t)t * W + r * D + d] + bias[r * D + d];
      if (r < H)
        cpu::rmsnorm_forward(&q_ref[((size_t)t * H + r) * D], row.data(), q_norm.data(), 1, D, eps);
      else if (r < H + G)
        cpu::rmsnorm_forward(&k_ref[((size_t)t * G + r - H) * D], row.data(), k_norm.data(), 1, D,
                             eps);
      else
        std::copy(row.begin(), row.end(), &v_ref[((size_t)t * G + r - H - G) * D]);
    }
  DevF qkv_d(qkv), bias_d(bias), q_norm_d(q_norm), k_norm_d(k_norm);
  DevB q_d(q_ref.size()), k_d(k_ref.size()), v_d(v_ref.size());
  ASSERT_OK(qkv_split(q_d.ptr, k_d.ptr, v_d.ptr, qkv_d.ptr, bias_d.ptr, q_norm_d.ptr, k_norm_d.ptr,
                      T, H, G, D, eps, nullptr));
  checks.push_back({"qkv split q (normed)", q_d.download(), q_ref});
  checks.push_back({"qkv split k (normed)", k_d.download(), k_ref});
  checks.push_back({"qkv split v", v_d.download(), v_ref});
}

// The decode step's one-row product (gemm_nt with M = 1: our GEMV, not cuBLAS) against the plain
// triple loop (kernels/cpu/linear.h): fp32 out written, fp32 out added onto a base (beta 1: the
// residual stream), bf16 out. K = H·D (rows shorter than a warp's first loads) and the model
// widths K = 4096 and 14336 (the down projection), N not a multiple of the 8 rows a block.
void run_gemv(const Shape& s, std::vector<Check>& checks) {
  cublasHandle_t cublas = nullptr;
  ASSERT_EQ(cublasCreate(&cublas), CUBLAS_STATUS_SUCCESS);
  const uint64_t seed = seed_of(s);
  const int sizes[3][2] = {{s.T + 8, s.H * s.D}, {1003, 4096}, {37, 14336}};
  for (const auto& nk : sizes) {
    const int N = nk[0], K = nk[1];
    const auto w = random_bf16((size_t)N * K, seed + K, -1, 1);
    const auto x = random_bf16(K, seed + K + 1, -1, 1);
    const auto base = random_floats(N, seed + K + 2, -1, 1);
    std::vector<float> y_ref(N);
    cpu::linear_forward_reference(y_ref.data(), x.data(), w.data(), nullptr, 1, K, N);
    std::vector<float> acc_ref = y_ref;
    for (int i = 0; i < N; ++i) acc_ref[i] += base[i];
    DevB w_d(w), x_d(x), y16_d(N);
    DevF y_d(N), acc_d(base);
    ASSERT_OK(gemm_nt(cublas, y_d.ptr, false, x_d.ptr, w_d.ptr, 1, N, K, 0.0f, nullptr));
    ASSERT_OK(gemm_nt(cublas, acc_d.ptr, false, x_d.ptr, w_d.ptr, 1, N, K, 1.0f, nullptr));
    ASSERT_OK(gemm_nt(cublas, y16_d.ptr, true, x_d.ptr, w_d.ptr, 1, N, K, 0.0f, nullptr));
    const std::string nk_label = " (N=" + std::to_string(N) + ", K=" + std::to_string(K) + ")";
    checks.push_back({"gemv y" + nk_label, y_d.download(), y_ref});
    checks.push_back({"gemv y += (beta 1)" + nk_label, acc_d.download(), acc_ref});
    checks.push_back({"gemv y bf16" + nk_label, y16_d.download(), y_ref});
  }
  cublasDestroy(cublas);
}

// Attention over q (T, H, D), k, v (T, G, D) with `mask`: y, and dq, dk, dv from the forward's y
// and lse. CPU: the one-query-at-a-time specification up to T = 200, the blocked form beyond.
void run_attention_mask(const Shape& s, cpu::AttentionMask mask, std::vector<Check>& checks) {
  const int T = s.T, H = s.H, G = s.G, D = s.D;
  const uint64_t seed = seed_of(s) + 17 * mask.sinks;
  const auto q = random_bf16((size_t)T * H * D, seed, -2, 2);
  const auto k = random_bf16((size_t)T * G * D, seed + 1, -2, 2);
  const auto v = random_bf16((size_t)T * G * D, seed + 2, -1, 1);
  const auto dy = random_floats((size_t)T * H * D, seed + 3, -1, 1);
  std::vector<float> y_ref(q.size()), dq_ref = zeros(q.size()), dk_ref = zeros(k.size()),
                                      dv_ref = zeros(v.size());
  if (T <= 200) {
    cpu::attention_forward_reference(y_ref.data(), q.data(), k.data(), v.data(), T, T, 0, H, G, D,
                                     mask);
    cpu::attention_backward_reference(dq_ref.data(), dk_ref.data(), dv_ref.data(), dy.data(),
                                      q.data(), k.data(), v.data(), T, H, G, D, mask);
  } else {
    cpu::attention_forward(y_ref.data(), q.data(), k.data(), v.data(), T, T, 0, H, G, D, mask);
    cpu::attention_backward(dq_ref.data(), dk_ref.data(), dv_ref.data(), dy.data(), q.data(),
                            k.data(), v.data(), T, H, G, D, mask);
  }
  const AttentionMaskSpec spec{mask.sinks, mask.window};
  DevB q_d(q), k_d(k), v_d(v), y_d(q.size());
  DevF dy_d(dy), lse_d((size_t)T * H), dq_d(q.size()), dk_d(k.size()), dv_d(v.size());
  const size_t ws_bytes = attention_backward_workspace_bytes(T, H, G, D);
  DevF ws((ws_bytes + sizeof(float) - 1) / sizeof(float));
  ASSERT_OK(
      attention_forward(y_d.ptr, lse_d.ptr, q_d.ptr, k_d.ptr, v_d.ptr, T, H, G, D, spec, nullptr));
  ASSERT_OK(attention_backward(dq_d.ptr, dk_d.ptr, dv_d.ptr, dy_d.ptr, y_d.ptr, lse_d.ptr, q_d.ptr,
                               k_d.ptr, v_d.ptr, T, H, G, D, spec, ws.ptr, ws_bytes, nullptr));
  EXPECT_EQ(count_nonfinite(lse_d.download()), 0u) << "lse";
  checks.push_back({"attention y", y_d.download(), y_ref});
  const double floor = max_abs(dy) * max_abs(v) * max_abs(q) * max_abs(k);  // |dP|·|S| bounds
  checks.push_back({"attention dq", dq_d.download(), dq_ref, true, floor});
  checks.push_back({"attention dk", dk_d.download(), dk_ref, true, floor});
  checks.push_back({"attention dv", dv_d.download(), dv_ref, true});
}
void run_attention_causal(const Shape& s, std::vector<Check>& checks) {
  run_attention_mask(s, cpu::AttentionMask{0, -1}, checks);
}
void run_attention_sink_window(const Shape& s, std::vector<Check>& checks) {
  run_attention_mask(s, cpu::AttentionMask{8, 56}, checks);  // the hybrid's default
}

// The chunked Gated DeltaNet from a zero state: o and the final state against the CPU recurrence
// (kv heads expanded to the query heads); the backward against the fp64 CPU backward (dk, dv
// summed over each group's query heads).
void run_gated_delta(const Shape& s, std::vector<Check>& checks) {
  const int N = s.T, H = s.H, G = s.G, D = s.D;
  const uint64_t seed = seed_of(s);
  auto q = random_floats((size_t)N * H * D, seed, -1, 1),
       k = random_floats((size_t)N * G * D, seed + 1, -1, 1);
  unit_rows(q, D), unit_rows(k, D);
  round_bf16(q), round_bf16(k);
  const auto v = random_bf16((size_t)N * G * D, seed + 2, -1, 1);
  const auto g = random_floats((size_t)N * H, seed + 3, -0.3f, 0.0f);
  const auto beta = random_floats((size_t)N * H, seed + 4, 0.05f, 0.95f);
  const auto dout = random_bf16((size_t)N * H * D, seed + 5, -1, 1);
  const auto k_full = expand_heads(k, N, H, G, D), v_full = expand_heads(v, N, H, G, D);
  std::vector<float> o_ref(q.size()), state_ref((size_t)H * D * D);
  cpu::gated_delta_recurrent_forward<float>(o_ref.data(), state_ref.data(), nullptr, q.data(),
                                            k_full.data(), v_full.data(), g.data(), beta.data(), N,
                                            H, D, D);
  auto f64 = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
  auto f32 = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
  const auto qd = f64(q), kd = f64(k_full), vd = f64(v_full), gd = f64(g), bd = f64(beta),
             dod = f64(dout);
  std::vector<double> dq(q.size(), 0.0), dk(q.size(), 0.0), dv(q.size(), 0.0), dg(g.size(), 0.0),
      dbeta(g.size(), 0.0);
  cpu::gated_delta_backward<double>(dq.data(), dk.data(), dv.data(), dg.data(), dbeta.data(),
                                    dod.data(), qd.data(), kd.data(), vd.data(), gd.data(),
                                    bd.data(), N, H, D, D);

  DevB q_d(q), k_d(k), v_d(v), dout_d(dout), o_d(q.size());
  DevF g_d(g), beta_d(beta), state_d(state_ref.size());
  DevF dq_d(q.size()), dk_d(k.size()), dv_d(v.size()), dg_d(g.size()), dbeta_d(g.size());
  const size_t fwd_bytes = gated_delta_forward_workspace_bytes(N, H, D, false);
  const size_t bwd_bytes = gated_delta_backward_workspace_bytes(N, H, D);
  DevF fwd_ws((fwd_bytes + 3) / 4), bwd_ws((bwd_bytes + 3) / 4);
  ASSERT_OK(gated_delta_chunked_forward(o_d.ptr, state_d.ptr, nullptr, q_d.ptr, k_d.ptr, v_d.ptr,
                                        g_d.ptr, beta_d.ptr, N, H, G, D, fwd_ws.ptr, fwd_bytes,
                                        nullptr));
  ASSERT_OK(gated_delta_backward(dq_d.ptr, dk_d.ptr, dv_d.ptr, dg_d.ptr, dbeta_d.ptr, dout_d.ptr,
                                 q_d.ptr, k_d.ptr, v_d.ptr, g_d.ptr, beta_d.ptr, N, H, G, D,
                                 bwd_ws.ptr, bwd_bytes, nullptr));
  checks.push_back({"gated delta o", o_d.download(), o_ref});
  checks.push_back({"gated delta final state", state_d.download(), state_ref});
  checks.push_back({"gated delta dq", dq_d.download(), f32(dq), true});
  checks.push_back({"gated delta dk", dk_d.download(), sum_heads(f32(dk), N, H, G, D), true});
  checks.push_back({"gated delta dv", dv_d.download(), sum_heads(f32(dv), N, H, G, D), true});
  checks.push_back({"gated delta dg", dg_d.download(), f32(dg), true});
  checks.push_back({"gated delta dbeta", dbeta_d.download(), f32(dbeta), true});
}

// The attention-transfer loss of a (T, H, D) output against the bf16 teacher and its gradient;
// the reference is train/attention_transfer.cpp's nmse_loss (its library is not part of the GPU
// machine's build), restated: Σ(s − t)² / max(Σt², 1e-12) and dy = 2 (s − t) / max(Σt², 1e-12).
void run_nmse_loss(const Shape& s, std::vector<Check>& checks) {
  const long n = (long)s.T * s.H * s.D;
  const uint64_t seed = seed_of(s);
  const auto student = random_floats(n, seed, -1, 1);
  const auto teacher = random_bf16(n, seed + 1, -1, 1);
  double err = 0, ref = 0;
  for (long i = 0; i < n; ++i) {
    err += ((double)student[i] - teacher[i]) * ((double)student[i] - teacher[i]);
    ref += (double)teacher[i] * teacher[i];
  }
  ref = std::max(ref, 1e-12);
  std::vector<float> dy_ref(n);
  for (long i = 0; i < n; ++i) dy_ref[i] = (float)(2.0 * ((double)student[i] - teacher[i]) / ref);
  DevF student_d(student), dy_d(n);
  DevB teacher_d(teacher);
  Dev<double> sums_d(2);
  const size_t ws_bytes = nmse_workspace_bytes();
  Dev<double> ws(ws_bytes / sizeof(double));
  ASSERT_OK(nmse_loss_forward_backward(sums_d.ptr, dy_d.ptr, student_d.ptr, teacher_d.ptr, n, 1.0f,
                                       ws.ptr, ws_bytes, nullptr));
  const auto sums = sums_d.download();
  checks.push_back({"nmse loss",
                    {(float)((double)sums[0] / std::max((double)sums[1], 1e-12))},
                    {(float)(err / ref)}});
  checks.push_back({"nmse loss dy", dy_d.download(), dy_ref, true});
}

// Three AdamW steps (clipping by the global norm, weight decay) over one flat buffer against
// train/optimizer.cpp's AdamW: the gradient norms, the values, both moments, and the gradient
// zeroed after each step.
void run_optimizer(const Shape& s, std::vector<Check>& checks) {
  const long n = (long)s.T * s.H * s.D;
  const uint64_t seed = seed_of(s);
  train::AdamWOptions options;
  options.weight_decay = 0.01f;
  options.clip_norm = 1.0f;  // the gradients below have norms ≈ √(n/3) > 1: clipped
  const float lr = 1e-2f;
  mixers::Parameter p;
  p.value = random_floats(n, seed, -1, 1);
  p.grad = zeros(n);
  train::AdamW adamw({&p}, options);
  DevF value_d(p.value), grad_d(n), m_d(zeros(n)), v_d(zeros(n)), norm_d(1);
  const size_t ws_bytes = grad_norm_workspace_bytes();
  Dev<double> ws(ws_bytes / sizeof(double));
  std::vector<float> norms, norms_ref;
  for (long t = 1; t <= 3; ++t) {
    p.grad = random_floats(n, seed + t, -1, 1);
    grad_d.upload(p.grad);
    ASSERT_OK(grad_norm(norm_d.ptr, grad_d.ptr, n, ws.ptr, ws_bytes, nullptr));
    AdamWStep step;
    step.lr = lr, step.beta1 = options.beta1, step.beta2 = options.beta2, step.eps = options.eps;
    step.weight_decay = options.weight_decay, step.clip_norm = options.clip_norm, step.t = t;
    ASSERT_OK(adamw_step(value_d.ptr, grad_d.ptr, m_d.ptr, v_d.ptr, n, norm_d.ptr, step, nullptr));
    norms.push_back(norm_d.download()[0]);
    norms_ref.push_back(adamw.step(lr));
  }
  checks.push_back({"grad norm", norms, norms_ref});
  checks.push_back({"adamw values", value_d.download(), p.value});
  checks.push_back({"adamw first moments", m_d.download(), adamw.first_moments()});
  checks.push_back({"adamw second moments", v_d.download(), adamw.second_moments()});
  checks.push_back({"adamw grad zeroed", grad_d.download(), zeros(n)});
}

// ---- the table ----------------------------------------------------------------------------------

// clang-format off
const OpCase kOps[] = {
    // name                   run                        forward               backward
    {"norm",                  run_norm,                  kOneRounding,         kFp32},
    {"unit_rows",             run_unit_rows,             kOneRounding,         kFp32},
    {"rope",                  run_rope,                  kOneRounding,         kOneRounding},
    {"short_conv",            run_short_conv,            kOneRounding,         kFp32},
    {"conv_rope_unit",        run_conv_rope_unit,        kOneRounding,         kNone},
    {"activation",            run_activation,            kOneRounding,         kOneRounding},
    {"embedding",             run_embedding,             kExact,               kNone},
    {"argmax",                run_argmax,                kExact,               kNone},
    {"conversion",            run_conversion,            kExact,               kExact},
    {"qkv_split",             run_qkv_split,             kOneRounding,         kNone},
    {"gemv",                  run_gemv,                  kOneRounding,         kNone},
    {"attention_causal",      run_attention_causal,      kAttentionForward,    kAttentionBackward},
    {"attention_sink_window", run_attention_sink_window, kAttentionForward,    kAttentionBackward},
    {"gated_delta",           run_gated_delta,           kGatedDeltaForward,   kGatedDeltaBackward},
    {"nmse_loss",             run_nmse_loss,             kFp32,                kFp32},
    {"optimizer",             run_optimizer,             kFp32,                kNone},
};
// clang-format on

// T: one token, odd lengths within and across 64-token chunks; D 64 and 128; H = 4 over G = 2.
const Shape kShapes[] = {
    {1, 4, 2, 64},   {1, 4, 2, 128},   {37, 4, 2, 128},
    {130, 4, 2, 64}, {130, 4, 2, 128}, {300, 4, 2, 64},
};

class CudaOps : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaOps, MatchCpuReference) {
  REQUIRE_GPU();
  const OpCase& op = GetParam();
  for (const Shape& shape : kShapes) {
    char label[96];
    std::snprintf(label, sizeof label, "%s T=%d H=%d G=%d D=%d", op.name, shape.T, shape.H, shape.G,
                  shape.D);
    SCOPED_TRACE(label);
    std::printf("  %s\n", label);
    std::vector<Check> checks;
    op.run(shape, checks);
    ASSERT_FALSE(checks.empty()) << "the op stopped before its outputs";
    for (const Check& c : checks) expect_matches(c, c.backward ? op.backward : op.forward);
  }
}

INSTANTIATE_TEST_SUITE_P(Table, CudaOps, ::testing::ValuesIn(kOps),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace golinear::kernels::cuda
