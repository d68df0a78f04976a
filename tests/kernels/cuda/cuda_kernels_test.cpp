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

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
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

// One sequence and a batch of sequences of different lengths (1 key, a partial tile, many
// splits) against the CPU attention of the last query; group sizes 4 and 7 (Qwen2-7B's 28/4),
// head_dim 64 and 128.
TEST(CudaAttention, DecodeMatchesCpu) {
  REQUIRE_GPU();
  struct Case { int H, G, D; };
  for (const Case cs : {Case{8, 2, 128}, Case{28, 4, 128}, Case{8, 8, 64}}) {
    const int H = cs.H, G = cs.G, D = cs.D;
    const std::vector<long> lengths = {1000, 1, 37, 4100};
    const int B = (int)lengths.size();
    const long max_len = *std::max_element(lengths.begin(), lengths.end());
    std::vector<float> q_all, ref_all;
    std::vector<std::unique_ptr<DevB>> ks, vs;
    std::vector<const bf16*> k_rows, v_rows;
    for (int b = 0; b < B; ++b) {
      const long ctx = lengths[b];
      auto q = random_floats((size_t)H * D, 10 * b + 1, -1, 1),
           k = random_floats((size_t)ctx * G * D, 10 * b + 2, -1, 1),
           v = random_floats((size_t)ctx * G * D, 10 * b + 3, -1, 1);
      round_bf16(q), round_bf16(k), round_bf16(v);
      std::vector<float> ref((size_t)H * D);
      cpu::attention_forward(ref.data(), q.data(), k.data(), v.data(), 1, ctx, ctx - 1, H, G, D, {});
      q_all.insert(q_all.end(), q.begin(), q.end());
      ref_all.insert(ref_all.end(), ref.begin(), ref.end());
      ks.push_back(std::make_unique<DevB>(k)), vs.push_back(std::make_unique<DevB>(v));
    }
    for (int b = 0; b < B; ++b) k_rows.push_back(ks[b]->ptr), v_rows.push_back(vs[b]->ptr);
    DevB dq(q_all.size()), y(ref_all.size()), y1((size_t)H * D);
    dq.upload(q_all);
    const size_t ws_bytes = attention_decode_workspace_bytes(B, H, G, D, max_len);
    void *ws = nullptr, *tables = nullptr;
    ASSERT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&tables, B * (2 * sizeof(void*) + sizeof(long))), cudaSuccess);
    auto** dk_rows = static_cast<const bf16**>(tables);
    const bf16** dv_rows = dk_rows + B;
    long* dlen = reinterpret_cast<long*>(dv_rows + B);
    ASSERT_EQ(cudaMemcpy(dk_rows, k_rows.data(), B * sizeof(void*), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dv_rows, v_rows.data(), B * sizeof(void*), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dlen, lengths.data(), B * sizeof(long), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_OK(attention_decode_batch(y.ptr, dq.ptr, dk_rows, dv_rows, dlen, B, max_len, H, G, D, ws,
                                     ws_bytes, nullptr));
    const std::string what = "H=" + std::to_string(H) + " G=" + std::to_string(G) + " D=" + std::to_string(D);
    expect_close(y.download(), ref_all, 1e-4, ("attention decode batch " + what).c_str());
    for (int b = 0; b < B; ++b) {  // one sequence at a time (the batch-1 path)
      ASSERT_OK(attention_decode(y1.ptr, dq.ptr + (size_t)b * H * D, ks[b]->ptr, vs[b]->ptr,
                                 lengths[b], H, G, D, ws, ws_bytes, nullptr));
      const std::vector<float> ref(ref_all.begin() + (size_t)b * H * D,
                                   ref_all.begin() + (size_t)(b + 1) * H * D);
      expect_close(y1.download(), ref, 1e-4, ("attention decode " + what).c_str());
    }
    // Too small a workspace, or a group beyond 8 query heads per kv head: refused.
    EXPECT_FALSE(attention_decode(y1.ptr, dq.ptr, ks[0]->ptr, vs[0]->ptr, lengths[0], H, G, D, ws,
                                  16, nullptr).ok());
    cudaFree(ws), cudaFree(tables);
  }
}

// A position per row gives, bit for bit, what rope_apply gives each row at that position.
TEST(CudaRope, PerRowPositionsMatchOneRowAtATime) {
  REQUIRE_GPU();
  const int B = 4, N = 3, D = 64;
  const std::vector<long> pos = {0, 7, 131071, 5};
  auto x = random_floats((size_t)B * N * D, 51, -1, 1), inv = random_floats(D / 2, 52, 1e-4f, 1.0f);
  round_bf16(x);
  DevB rows(x), one((size_t)N * D);
  DevF dinv(inv);
  Dev<long> dpos(pos.size());
  ASSERT_EQ(cudaMemcpy(dpos.ptr, pos.data(), pos.size() * sizeof(long), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_OK(rope_apply_at(rows.ptr, dinv.ptr, B, N, D, dpos.ptr, nullptr));
  const auto got = rows.raw();
  for (int b = 0; b < B; ++b) {
    one.upload(std::vector<float>(x.begin() + (size_t)b * N * D, x.begin() + (size_t)(b + 1) * N * D));
    ASSERT_OK(rope_apply(one.ptr, dinv.ptr, 1, N, D, pos[b], 1, nullptr));
    const auto want = one.raw();
    EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin() + (size_t)b * N * D * 2)) << "row " << b;
  }
}

// The new key/value rows of a batch land in each sequence's cache at its own position.
TEST(CudaAttention, KvCacheAppendWritesEachRowAtItsPosition) {
  REQUIRE_GPU();
  const int B = 3, G = 2, D = 64, cap = 10;
  const std::vector<long> pos = {0, 9, 4};
  auto k = random_floats((size_t)B * G * D, 41, -1, 1), v = random_floats(k.size(), 42, -1, 1);
  round_bf16(k), round_bf16(v);
  DevB dk(k.size()), dv(v.size());
  dk.upload(k), dv.upload(v);
  std::vector<std::unique_ptr<DevB>> kc, vc;
  std::vector<bf16*> k_rows, v_rows;
  for (int b = 0; b < B; ++b) {
    kc.push_back(std::make_unique<DevB>(std::vector<float>((size_t)cap * G * D, 0.5f)));
    vc.push_back(std::make_unique<DevB>(std::vector<float>((size_t)cap * G * D, 0.5f)));
    k_rows.push_back(kc[b]->ptr), v_rows.push_back(vc[b]->ptr);
  }
  void* tables = nullptr;
  ASSERT_EQ(cudaMalloc(&tables, B * (2 * sizeof(void*) + sizeof(long))), cudaSuccess);
  auto** dk_rows = static_cast<bf16**>(tables);
  bf16** dv_rows = dk_rows + B;
  long* dpos = reinterpret_cast<long*>(dv_rows + B);
  ASSERT_EQ(cudaMemcpy(dk_rows, k_rows.data(), B * sizeof(void*), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dv_rows, v_rows.data(), B * sizeof(void*), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dpos, pos.data(), B * sizeof(long), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_OK(kv_cache_append(dk_rows, dv_rows, dk.ptr, dv.ptr, dpos, B, G, D, nullptr));
  for (int b = 0; b < B; ++b) {
    const auto kh = kc[b]->download(), vh = vc[b]->download();
    for (int j = 0; j < cap; ++j)
      for (int i = 0; i < G * D; ++i) {
        const float want_k = j == pos[b] ? k[(size_t)b * G * D + i] : 0.5f;
        const float want_v = j == pos[b] ? v[(size_t)b * G * D + i] : 0.5f;
        ASSERT_EQ(kh[(size_t)j * G * D + i], want_k) << "b " << b << " row " << j;
        ASSERT_EQ(vh[(size_t)j * G * D + i], want_v) << "b " << b << " row " << j;
      }
  }
  cudaFree(tables);
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
