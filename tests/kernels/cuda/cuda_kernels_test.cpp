// GPU kernels against the CPU reference (kernels/cpu, mixers/hybrid_mixer) beyond the op table of
// cuda_ops_test.cpp (which runs every op family forward and backward over its shapes): the
// chunked GDN forward's value blocks and initial state, its recurrent form, attention decode, and
// the fused conv → RoPE / unit-norm stage against the unfused stages. Normalized MSE and
// max-abs error, NaN/Inf checks, and guard values after every output (outputs are poisoned with
// 0xFF bytes — NaN in bf16 and fp32 — so an unwritten element fails the finite check and a write
// outside the array changes a guard). Label `gpu`: CI (no GPU) skips them with `ctest -LE gpu`.
//
// Tolerances: inputs are bf16-rounded before the CPU runs, so differences come from bf16 storage
// of outputs and intermediates (W, U, P, the bf16 copy of the state in the chunked form; P in
// attention): relative 2^-8 per value, i.e. NMSE ~1e-5 per rounding; chained roundings through
// 64-token chunks give up to ~1e-3. The GDN forward's threshold is 5e-3.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/gated_delta.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/short_conv.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/gated_delta.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/short_conv.h"
#include "cuda_test_util.h"

namespace golinear::kernels::cuda {
namespace {

using namespace ::golinear::kernels::test;

struct GdnInputs {
  int N, H, G, D;
  std::vector<float> q, k, v, g, beta;
};
GdnInputs gdn_inputs(int N, int H, int G, int D, uint64_t seed) {
  GdnInputs in{N, H, G, D, {}, {}, {}, {}, {}};
  in.q = random_floats((size_t)N * H * D, seed, -1, 1);
  in.k = random_floats((size_t)N * G * D, seed + 1, -1, 1);
  in.v = random_floats((size_t)N * G * D, seed + 2, -1, 1);
  in.g = random_floats((size_t)N * H, seed + 3, -0.3f, 0.0f);
  in.beta = random_floats((size_t)N * H, seed + 4, 0.05f, 0.95f);
  unit_rows(in.q, D);
  unit_rows(in.k, D);
  round_bf16(in.q), round_bf16(in.k), round_bf16(in.v);
  return in;
}

void run_gdn_forward(int N, int H, int G, int D, int value_block, bool with_init) {
  const GdnInputs in = gdn_inputs(N, H, G, D, 100 + N + D);
  const auto k_full = expand_heads(in.k, N, H, G, D), v_full = expand_heads(in.v, N, H, G, D);
  std::vector<float> init = random_floats((size_t)H * D * D, 7, -0.1f, 0.1f);
  std::vector<float> o_ref((size_t)N * H * D), s_ref((size_t)H * D * D);
  cpu::gated_delta_recurrent_forward<float>(o_ref.data(), s_ref.data(), with_init ? init.data() : nullptr,
                                            in.q.data(), k_full.data(), v_full.data(), in.g.data(),
                                            in.beta.data(), N, H, D, D);
  DevB q(in.q.size()), k(in.k.size()), v(in.v.size()), o(o_ref.size());
  DevF g(in.g.size()), beta(in.beta.size()), s_init(init.size()), s_final(s_ref.size());
  q.upload(in.q), k.upload(in.k), v.upload(in.v), g.upload(in.g), beta.upload(in.beta), s_init.upload(init);
  const size_t ws_bytes = gated_delta_forward_workspace_bytes(N, H, D, false);
  void* ws = nullptr;
  ASSERT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
  ASSERT_OK(gated_delta_chunked_forward(o.ptr, s_final.ptr, with_init ? s_init.ptr : nullptr, q.ptr,
                                        k.ptr, v.ptr, g.ptr, beta.ptr, N, H, G, D, ws, ws_bytes,
                                        nullptr, nullptr, value_block));
  expect_close(o.download(), o_ref, 5e-3, "gdn chunked o");
  expect_close(s_final.download(), s_ref, 5e-3, "gdn chunked state_final");
  cudaFree(ws);
}

TEST(CudaGatedDelta, ChunkedForwardMatchesCpuD64WithInitialState) {
  REQUIRE_GPU();
  run_gdn_forward(333, 4, 1, 64, 16, true);
}
TEST(CudaGatedDelta, ChunkedForwardValueBlock16D128) {
  REQUIRE_GPU();
  run_gdn_forward(130, 2, 2, 128, 16, true);
}

// The register-resident state pass at every column split, over many chunks (a ragged last one).
TEST(CudaGatedDelta, ChunkedForwardAllValueBlocksD128) {
  REQUIRE_GPU();
  for (int vb : {0, 32, 64, 128}) run_gdn_forward(1000, 2, 1, 128, vb, true);
}
TEST(CudaGatedDelta, ChunkedForwardAllValueBlocksD64) {
  REQUIRE_GPU();
  for (int vb : {0, 16, 64}) run_gdn_forward(700, 3, 3, 64, vb, vb == 16);
}

TEST(CudaGatedDelta, RecurrentForwardMatchesCpu) {
  REQUIRE_GPU();
  const int N = 77, H = 4, G = 2, D = 128;
  const GdnInputs in = gdn_inputs(N, H, G, D, 5);
  const auto k_full = expand_heads(in.k, N, H, G, D), v_full = expand_heads(in.v, N, H, G, D);
  std::vector<float> o_ref((size_t)N * H * D), s_ref((size_t)H * D * D);
  cpu::gated_delta_recurrent_forward<float>(o_ref.data(), s_ref.data(), nullptr, in.q.data(),
                                            k_full.data(), v_full.data(), in.g.data(),
                                            in.beta.data(), N, H, D, D);
  DevB q(in.q.size()), k(in.k.size()), v(in.v.size()), o(o_ref.size());
  DevF g(in.g.size()), beta(in.beta.size()), state(s_ref.size());
  q.upload(in.q), k.upload(in.k), v.upload(in.v), g.upload(in.g), beta.upload(in.beta);
  ASSERT_EQ(cudaMemset(state.ptr, 0, s_ref.size() * 4), cudaSuccess);
  ASSERT_OK(gated_delta_recurrent_forward(o.ptr, state.ptr, q.ptr, k.ptr, v.ptr, g.ptr, beta.ptr,
                                          N, H, G, D, nullptr));
  expect_close(o.download(), o_ref, 1e-4, "gdn recurrent o");
  expect_close(state.download(), s_ref, 1e-6, "gdn recurrent state");
}

TEST(CudaAttention, DecodeMatchesCpu) {
  REQUIRE_GPU();
  const int H = 8, G = 2, D = 128;
  const long ctx = 1000;
  auto q = random_floats((size_t)H * D, 1, -1, 1), k = random_floats((size_t)ctx * G * D, 2, -1, 1),
       v = random_floats((size_t)ctx * G * D, 3, -1, 1);
  round_bf16(q), round_bf16(k), round_bf16(v);
  std::vector<float> ref((size_t)H * D);
  cpu::attention_forward(ref.data(), q.data(), k.data(), v.data(), 1, ctx, ctx - 1, H, G, D, {});
  DevB dq(q.size()), dk(k.size()), dv(v.size()), y(ref.size());
  dq.upload(q), dk.upload(k), dv.upload(v);
  const size_t ws_bytes = attention_decode_workspace_bytes(H, D, ctx);
  void* ws = nullptr;
  ASSERT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
  ASSERT_OK(attention_decode(y.ptr, dq.ptr, dk.ptr, dv.ptr, ctx, H, G, D, ws, ws_bytes, nullptr));
  expect_close(y.download(), ref, 1e-4, "attention decode");
  cudaFree(ws);
}

// The fused input stage (conv → RoPE / unit rows) against the CPU conv, rope_forward and unit
// rows of the bf16 conv output, and against the unfused GPU stages (the conv bitwise; RoPE and
// the unit rows within bf16 rounding: the norm's sum runs in another order).
TEST(CudaElementwise, ConvRopeUnitMatchesCpuAndTheUnfusedStages) {
  REQUIRE_GPU();
  for (int D : {64, 128}) {
    const int T = 150, heads = 3, N = heads * D;
    auto x = random_floats((size_t)T * N, 11, -1, 1), w = random_floats((size_t)N * 4, 12, -1, 1),
         inv = random_floats(D / 2, 13, 1e-4f, 1.0f);
    round_bf16(x);
    std::vector<float> conv((size_t)T * N);
    cpu::short_conv_forward<float>(conv.data(), x.data(), w.data(), T, N);
    round_bf16(conv);
    std::vector<float> rope_ref = conv, unit_ref = conv;
    cpu::rope_forward(rope_ref.data(), inv.data(), T, heads, D, 0);
    unit_rows(unit_ref, D);
    DevB dx(x.size()), c(conv.size()), r(conv.size()), u(conv.size()), c2(conv.size()), r2(conv.size()),
        u2(conv.size());
    DevF dw(w.size()), dinv(inv.size()), cs((size_t)T * D);
    dx.upload(x), dw.upload(w), dinv.upload(inv);
    ASSERT_OK(rope_table(reinterpret_cast<float2*>(cs.ptr), dinv.ptr, T, D, 0, nullptr));
    ASSERT_OK(conv_rope_unit_forward(c.ptr, r.ptr, u.ptr, dx.ptr, dw.ptr,
                                     reinterpret_cast<const float2*>(cs.ptr), T, heads, D, nullptr));
    expect_close(c.download(), conv, 1e-6, "fused conv");
    expect_close(r.download(), rope_ref, 1e-4, "fused rope");
    expect_close(u.download(), unit_ref, 1e-4, "fused unit rows");
    // The unfused stages the training forward used before.
    ASSERT_OK(short_conv_forward(c2.ptr, dx.ptr, dw.ptr, T, N, nullptr));
    ASSERT_EQ(cudaMemcpy(r2.ptr, c2.ptr, conv.size() * 2, cudaMemcpyDeviceToDevice), cudaSuccess);
    ASSERT_OK(rope_apply(r2.ptr, dinv.ptr, T, heads, D, 0, 1, nullptr));
    ASSERT_OK(unit_rows_forward(u2.ptr, c2.ptr, (long)T * heads, D, nullptr));
    EXPECT_EQ(c.raw(), c2.raw());  // the same conv arithmetic and rounding
    expect_close(r.download(), r2.download(), 1e-5, "fused vs unfused rope");
    expect_close(u.download(), u2.download(), 1e-5, "fused vs unfused unit");
  }
}

}  // namespace
}  // namespace golinear::kernels::cuda
