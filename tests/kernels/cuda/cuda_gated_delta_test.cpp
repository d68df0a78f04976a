// The chunked Gated DeltaNet backward on the GPU (kernels/cuda/gated_delta.h) against the exact
// CPU reference cpu::gated_delta_backward<double> (the token-by-token recurrence differentiated
// in fp64). Label `gpu`. Shapes cover T < 64, T not a multiple of 64, GQA with H/G = 4, D = 64 and
// 128, g strongly negative (−8 … −2: the state forgets within a few tokens, e^γ underflows inside
// a chunk) and near 0 (−0.01 … 0: long memory, dS carried over many chunks), β in (0, 1).
//
// Tolerance (normalized MSE, Σ(got − want)² / Σ want²): the inputs are bf16-rounded before the
// CPU runs, so the error comes only from the GPU's bf16 tensor-core operands: S_0, dS, W, U, Ũ,
// dŨ, T, P and the dS/dŨ checkpoints are rounded to bf16 (relative 2^-9 per value, NMSE ≈ 2^-18/3
// ≈ 1.3e-6 per rounding), about ten such roundings chained along a chunk's products, and the
// state/dS recurrences carry them across chunks: expected NMSE 1e-5 … 1e-4, measured 3e-6 … 2.3e-5
// on H200 (largest for g near 0 over many chunks; values are printed). Threshold kNmseTol = 1e-4:
// about 4× the worst measured.
// The forward tests below (CudaGatedDeltaForward) cover what the ones of cuda_kernels_test.cpp do
// not reach: the pipelined segments (their streams, per host thread) against one segment, and
// the persistent state pass (GatedDeltaForwardOptions::persistent; the default from T ≥ 8K) bit
// for bit against the pipeline. Against the CPU recurrence they keep the forward tests' NMSE
// threshold, 5e-3 (measured on H200: at most 1.4e-5).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/gated_delta.h"
#include "kernels/cuda/gated_delta.h"
#include "cuda_test_util.h"

namespace golinear::kernels::cuda {
namespace {

constexpr double kNmseTol = 1e-4;

using namespace ::golinear::kernels::test;

// expect_close that also refuses an all-zero reference and prints the reference's rms.
void expect_close_rms(const std::vector<float>& got, const std::vector<float>& want, double tol,
                      const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_TRUE(std::isfinite(got[i])) << what << " element " << i << " not finite";
  const Comparison e = compare(got, want);
  ASSERT_GT(e.ref, 0.0) << what << ": reference is all zero";
  const double nmse = e.err / e.ref;
  EXPECT_LT(nmse, tol) << what << ": nmse " << nmse << " max abs " << e.max_abs;
  std::printf("  %-10s nmse %.3e  max abs %.3e  rms ref %.3e\n", what, nmse, e.max_abs,
              std::sqrt(e.ref / got.size()));
}

struct Case {
  int N, H, G, D;
  float g_lo, g_hi;
};

void run_backward(const Case& cs, uint64_t seed, const GatedDeltaBackwardOptions& opt = {}) {
  const int N = cs.N, H = cs.H, G = cs.G, D = cs.D;
  std::printf("N=%d H=%d G=%d D=%d g in (%g, %g) vb=%d rvb=%d bf16 ckpt=%d\n", N, H, G, D, cs.g_lo,
              cs.g_hi, opt.value_block, opt.reverse_value_block, (int)opt.bf16_checkpoints);
  std::vector<float> q = random_floats((size_t)N * H * D, seed, -1, 1);
  std::vector<float> k = random_floats((size_t)N * G * D, seed + 1, -1, 1);
  std::vector<float> v = random_floats((size_t)N * G * D, seed + 2, -1, 1);
  std::vector<float> g = random_floats((size_t)N * H, seed + 3, cs.g_lo, cs.g_hi);
  std::vector<float> beta = random_floats((size_t)N * H, seed + 4, 0.02f, 0.98f);
  std::vector<float> dout = random_floats((size_t)N * H * D, seed + 5, -1, 1);
  unit_rows(q, D), unit_rows(k, D);
  round_bf16(q), round_bf16(k), round_bf16(v), round_bf16(dout);

  const std::vector<double> kd = expand_heads<double>(k, N, H, G, D),
                            vd = expand_heads<double>(v, N, H, G, D);
  const std::vector<double> qd(q.begin(), q.end()), gd(g.begin(), g.end()),
      bd(beta.begin(), beta.end()), dod(dout.begin(), dout.end());
  std::vector<double> dq((size_t)N * H * D, 0.0), dk(dq.size(), 0.0), dv(dq.size(), 0.0),
      dg((size_t)N * H, 0.0), db(dg.size(), 0.0);
  cpu::gated_delta_backward<double>(dq.data(), dk.data(), dv.data(), dg.data(), db.data(),
                                    dod.data(), qd.data(), kd.data(), vd.data(), gd.data(),
                                    bd.data(), N, H, D, D);

  DevB dq_in(q.size()), dk_in(k.size()), dv_in(v.size()), ddo(dout.size());
  DevF dgate(g.size()), dbeta_in(beta.size());
  dq_in.upload(q), dk_in.upload(k), dv_in.upload(v), ddo.upload(dout), dgate.upload(g),
      dbeta_in.upload(beta);
  DevF gq((size_t)N * H * D), gk((size_t)N * G * D), gv((size_t)N * G * D), gg((size_t)N * H),
      gb((size_t)N * H);
  const size_t ws_bytes = gated_delta_backward_workspace_bytes(N, H, D);
  void* ws = nullptr;
  ASSERT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(ws, 0xFF, ws_bytes), cudaSuccess);  // no reliance on zeroed scratch
  auto run = [&] {
    const Status st = gated_delta_backward(gq.ptr, gk.ptr, gv.ptr, gg.ptr, gb.ptr, ddo.ptr,
                                           dq_in.ptr, dk_in.ptr, dv_in.ptr, dgate.ptr,
                                           dbeta_in.ptr, N, H, G, D, ws, ws_bytes, nullptr,
                                           opt);
    ASSERT_TRUE(st.ok()) << st.error();
  };
  run();
  const auto gq1 = gq.download(), gk1 = gk.download(), gv1 = gv.download(), gg1 = gg.download(),
             gb1 = gb.download();
  auto to_f = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
  expect_close_rms(gq1, to_f(dq), kNmseTol, "dq");
  expect_close_rms(gk1, sum_heads(dk, N, H, G, D), kNmseTol, "dk");
  expect_close_rms(gv1, sum_heads(dv, N, H, G, D), kNmseTol, "dv");
  expect_close_rms(gg1, to_f(dg), kNmseTol, "dg");
  expect_close_rms(gb1, to_f(db), kNmseTol, "dbeta");
  // Deterministic: a second run gives the same bits (no float atomics).
  run();
  EXPECT_TRUE(gq.download() == gq1 && gk.download() == gk1 && gv.download() == gv1 &&
              gg.download() == gg1 && gb.download() == gb1)
      << "second run differs";
  // Step 1 apart (a trainer's forward): its output is the forward (against the CPU recurrence, the
  // forward tests' tolerance) and the backward after it, with forward_kept, gives the same bits
  // as the backward alone. The workspace poisoned again: step 2 reads only what step 1 wrote.
  ASSERT_EQ(cudaMemset(ws, 0xFF, ws_bytes), cudaSuccess);
  DevB o((size_t)N * H * D);
  Status st = gated_delta_forward_for_backward(o.ptr, dq_in.ptr, dk_in.ptr, dv_in.ptr, dgate.ptr,
                                               dbeta_in.ptr, N, H, G, D, ws, ws_bytes, nullptr, opt);
  ASSERT_TRUE(st.ok()) << st.error();
  std::vector<float> o_ref((size_t)N * H * D), s_ref((size_t)H * D * D);
  const auto kf = expand_heads<float>(k, N, H, G, D), vf = expand_heads<float>(v, N, H, G, D);
  cpu::gated_delta_recurrent_forward<float>(o_ref.data(), s_ref.data(), nullptr, q.data(),
                                            kf.data(), vf.data(), g.data(), beta.data(), N, H, D, D);
  expect_close(o.download(), o_ref, 5e-3, "o of the forward for the backward");
  GatedDeltaBackwardOptions kept = opt;
  kept.forward_kept = true;
  gq.upload(std::vector<float>(gq1.size(), 7.0f));  // the gradients are written, not kept
  st = gated_delta_backward(gq.ptr, gk.ptr, gv.ptr, gg.ptr, gb.ptr, ddo.ptr, dq_in.ptr, dk_in.ptr,
                            dv_in.ptr, dgate.ptr, dbeta_in.ptr, N, H, G, D, ws, ws_bytes, nullptr,
                            kept);
  ASSERT_TRUE(st.ok()) << st.error();
  EXPECT_TRUE(gq.download() == gq1 && gk.download() == gk1 && gv.download() == gv1 &&
              gg.download() == gg1 && gb.download() == gb1)
      << "the backward after gated_delta_forward_for_backward differs from the backward alone";
  cudaFree(ws);
}

TEST(CudaGatedDeltaBackward, D64GroupsOf2) {
  REQUIRE_GPU();
  run_backward({150, 4, 2, 64, -0.3f, 0.0f}, 11);
}
TEST(CudaGatedDeltaBackward, D128SingleHead) {
  REQUIRE_GPU();
  run_backward({100, 2, 1, 128, -0.3f, 0.0f}, 12);
}
TEST(CudaGatedDeltaBackward, ShorterThanOneChunkGqa4) {
  REQUIRE_GPU();
  run_backward({37, 4, 1, 128, -0.3f, 0.0f}, 13);
  run_backward({5, 4, 1, 64, -0.3f, 0.0f}, 14);
}
TEST(CudaGatedDeltaBackward, ExactChunkD64) {
  REQUIRE_GPU();
  run_backward({128, 2, 2, 64, -0.3f, 0.0f}, 15);
}
TEST(CudaGatedDeltaBackward, StronglyNegativeGateGqa4D128) {
  REQUIRE_GPU();
  run_backward({300, 8, 2, 128, -8.0f, -2.0f}, 16);
}
TEST(CudaGatedDeltaBackward, GateNearZeroLongD64) {
  REQUIRE_GPU();
  run_backward({1000, 4, 1, 64, -0.01f, 0.0f}, 17);
}
TEST(CudaGatedDeltaBackward, GateNearZeroD128Gqa4) {
  REQUIRE_GPU();
  run_backward({520, 4, 1, 128, -0.02f, 0.0f}, 18);
}

// The other reverse-pass slices (the default is covered above) and the forward's slices under the
// backward.
TEST(CudaGatedDeltaBackward, AllValueBlocks) {
  REQUIRE_GPU();
  for (int rvb : {16, 32, 128}) run_backward({200, 4, 1, 128, -0.1f, 0.0f}, 20 + rvb, {32, rvb});
  for (int rvb : {16, 64}) run_backward({200, 2, 2, 64, -0.1f, 0.0f}, 30 + rvb, {16, rvb});
}
// The fp32 [d][e] checkpoints (the default keeps bf16 Sᵀ).
TEST(CudaGatedDeltaBackward, Fp32Checkpoints) {
  REQUIRE_GPU();
  run_backward({300, 8, 2, 128, -0.5f, 0.0f}, 41, {0, 0, false});
  run_backward({150, 4, 2, 64, -0.3f, 0.0f}, 42, {0, 32, false});
}

// ---- forward: the pipelined segments ----------------------------------------------------------

struct ForwardResult {
  std::vector<float> o, state;
};
// The chunked forward (value_block vb, initial state when with_init, under `options`) against
// the CPU recurrence (NMSE < 5e-3, the tolerance of the other forward tests); returns the outputs
// for cross-checks between the GPU paths.
ForwardResult run_forward(const Case& cs, int vb, bool with_init, uint64_t seed,
                          const GatedDeltaForwardOptions& options = {}) {
  const int N = cs.N, H = cs.H, G = cs.G, D = cs.D;
  std::printf("forward N=%d H=%d G=%d D=%d vb=%d init=%d segments=%d (0: auto)\n", N, H, G, D,
              vb, (int)with_init, options.segments);
  std::vector<float> q = random_floats((size_t)N * H * D, seed, -1, 1);
  std::vector<float> k = random_floats((size_t)N * G * D, seed + 1, -1, 1);
  std::vector<float> v = random_floats((size_t)N * G * D, seed + 2, -1, 1);
  std::vector<float> g = random_floats((size_t)N * H, seed + 3, cs.g_lo, cs.g_hi);
  std::vector<float> beta = random_floats((size_t)N * H, seed + 4, 0.02f, 0.98f);
  std::vector<float> init = random_floats((size_t)H * D * D, seed + 5, -0.1f, 0.1f);
  unit_rows(q, D), unit_rows(k, D);
  round_bf16(q), round_bf16(k), round_bf16(v);
  const auto kf = expand_heads<float>(k, N, H, G, D), vf = expand_heads<float>(v, N, H, G, D);
  std::vector<float> o_ref((size_t)N * H * D), s_ref((size_t)H * D * D);
  cpu::gated_delta_recurrent_forward<float>(o_ref.data(), s_ref.data(),
                                            with_init ? init.data() : nullptr, q.data(), kf.data(),
                                            vf.data(), g.data(), beta.data(), N, H, D, D);
  DevB dq(q.size()), dk(k.size()), dv(v.size()), o(o_ref.size());
  DevF dg(g.size()), db(beta.size()), s0(init.size()), s1(s_ref.size());
  dq.upload(q), dk.upload(k), dv.upload(v), dg.upload(g), db.upload(beta), s0.upload(init);
  const size_t ws_bytes = gated_delta_forward_workspace_bytes(N, H, D, false);
  void* ws = nullptr;
  EXPECT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
  EXPECT_EQ(cudaMemset(ws, 0xFF, ws_bytes), cudaSuccess);
  // The uploads and the poisoning ran on the legacy stream, which a non-blocking stream does not
  // wait for (a busy GPU made the forward read them unfinished: NaN outputs, session 11).
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaStream_t stream;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const Status st = gated_delta_chunked_forward(o.ptr, s1.ptr, with_init ? s0.ptr : nullptr, dq.ptr,
                                                dk.ptr, dv.ptr, dg.ptr, db.ptr, N, H, G, D, ws,
                                                ws_bytes, stream, nullptr, vb, options);
  EXPECT_TRUE(st.ok()) << st.error();
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ForwardResult r{o.download(), s1.download()};
  expect_close(r.o, o_ref, 5e-3, "o");
  expect_close(r.state, s_ref, 5e-3, "state_final");
  cudaStreamDestroy(stream);
  cudaFree(ws);
  return r;
}

// value_block 64 (the default at D = 128), D = 128 and 64, a ragged last chunk, an initial
// state: `segments` pipelined segments (0: automatic) against one segment and the CPU. Both run
// the same bf16 products accumulated in the same order, the state carried between segments
// through exact fp32 copies, so the cross-check is tight.
void segments_vs_one(const Case& cs, bool with_init, int segments, uint64_t seed) {
  GatedDeltaForwardOptions one;
  one.segments = 1;
  const ForwardResult base = run_forward(cs, 64, with_init, seed, one);
  if (segments == 1) return;
  GatedDeltaForwardOptions pipelined;
  pipelined.segments = segments;
  const ForwardResult r = run_forward(cs, 64, with_init, seed, pipelined);
  const Comparison eo = compare(r.o, base.o), es = compare(r.state, base.state);
  std::printf("  %d segments vs one: o nmse %.3e, state nmse %.3e\n", segments, eo.nmse, es.nmse);
  EXPECT_LT(eo.nmse, 1e-6);
  EXPECT_LT(es.nmse, 1e-6);
}

TEST(CudaGatedDeltaForward, ValueBlock64D128Gqa4OneSegment) {
  REQUIRE_GPU();
  segments_vs_one({1000, 8, 2, 128, -0.3f, 0.0f}, true, 1, 51);
}
TEST(CudaGatedDeltaForward, ValueBlock64D128Pipelined) {
  REQUIRE_GPU();
  segments_vs_one({1000, 8, 2, 128, -0.1f, 0.0f}, false, 4, 52);  // 16 chunks in 4 segments
  segments_vs_one({4100, 4, 1, 128, -0.05f, 0.0f}, true, 0, 53);  // auto: 2 segments
}
TEST(CudaGatedDeltaForward, ValueBlock64D64) {
  REQUIRE_GPU();
  segments_vs_one({700, 4, 2, 64, -0.3f, 0.0f}, true, 3, 54);
  segments_vs_one({37, 2, 1, 64, -0.3f, 0.0f}, false, 0, 55);
}
// The default configuration over many segments (the pipeline's side stream and its events).
TEST(CudaGatedDeltaForward, DefaultPipelinedManySegments) {
  REQUIRE_GPU();
  GatedDeltaForwardOptions options;
  options.segments = 16;
  for (int vb : {0, 32}) run_forward({2100, 4, 1, 128, -0.1f, 0.0f}, vb, true, 56 + vb, options);
}
// The pipeline's streams and events belong to the host thread: a thread that runs a pipelined
// forward and exits releases them (no error left behind).
TEST(CudaGatedDeltaForward, PipelineStreamsPerThreadReleased) {
  REQUIRE_GPU();
  GatedDeltaForwardOptions options;
  options.segments = 4;
  ForwardResult a, b;
  std::thread worker([&] { a = run_forward({600, 4, 1, 128, -0.1f, 0.0f}, 0, true, 80, options); });
  worker.join();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  b = run_forward({600, 4, 1, 128, -0.1f, 0.0f}, 0, true, 80, options);
  EXPECT_TRUE(a.o == b.o && a.state == b.state) << "same input, another thread, other result";
}
// ---- forward: the persistent state pass (options.persistent; default from 128 chunks) -------

// The persistent pass's 64 counters: the 256 bytes that end the forward's workspace
// (gated_delta.h), uint32 each.
std::vector<uint32_t> ready_counters(const void* ws, size_t ws_bytes) {
  std::vector<uint32_t> c(64);
  EXPECT_EQ(cudaMemcpy(c.data(), static_cast<const char*>(ws) + ws_bytes - 256, 256,
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  return c;
}
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Under `segments` (options.segments; 0: auto: for the persistent pass, its prepare launches)
// and `wait_groups` (options.wait_groups; 0: 64), value_block vb: the forward with persistent
// never, then always twice on the same workspace (first on other values of v, so
// that a counter left over from the previous call, which would let the state pass read that
// call's stale W and U, shows as a difference). The persistent outputs and final state must
// equal the default's bit for bit (the same kernels per chunk; the state carried in registers
// instead of through fp32 workspace copies, which are exact), and match the CPU recurrence on
// `ref_heads` query heads (all when empty; the forward tests' NMSE tolerance 5e-3). With
// `persistent`, the counters show that the persistent pass ran (one per even wait group, H per
// chunk, H·NC in all); without, that it fell back to the pipeline (counters untouched).
void persistent_vs_default(const Case& cs, int vb, bool with_init, int segments, uint64_t seed,
                           bool persistent, std::vector<int> ref_heads = {},
                           int wait_groups = 0) {
  const int N = cs.N, H = cs.H, G = cs.G, D = cs.D;
  const int NC = (N + kGatedDeltaChunk - 1) / kGatedDeltaChunk;
  std::printf("persistent N=%d H=%d G=%d D=%d vb=%d init=%d segments=%d (0: auto) wait groups "
              "%d expect %s\n",
              N, H, G, D, vb, (int)with_init, segments, wait_groups,
              persistent ? "persistent" : "fallback");
  std::vector<float> q = random_floats((size_t)N * H * D, seed, -1, 1);
  std::vector<float> k = random_floats((size_t)N * G * D, seed + 1, -1, 1);
  std::vector<float> v = random_floats((size_t)N * G * D, seed + 2, -1, 1);
  std::vector<float> v_other = random_floats((size_t)N * G * D, seed + 6, -1, 1);
  std::vector<float> g = random_floats((size_t)N * H, seed + 3, cs.g_lo, cs.g_hi);
  std::vector<float> beta = random_floats((size_t)N * H, seed + 4, 0.02f, 0.98f);
  std::vector<float> init = random_floats((size_t)H * D * D, seed + 5, -0.1f, 0.1f);
  unit_rows(q, D), unit_rows(k, D);
  round_bf16(q), round_bf16(k), round_bf16(v), round_bf16(v_other);

  DevB dq(q.size()), dk(k.size()), dv(v.size()), o((size_t)N * H * D);
  DevF dg(g.size()), db(beta.size()), s0(init.size()), s1((size_t)H * D * D);
  dq.upload(q), dk.upload(k), dv.upload(v), dg.upload(g), db.upload(beta), s0.upload(init);
  const size_t ws_bytes = gated_delta_forward_workspace_bytes(N, H, D, false);
  void* ws = nullptr;
  ASSERT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(ws, 0xFF, ws_bytes), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // legacy-stream work before a non-blocking one
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  auto forward = [&](GatedDeltaPersistent mode) -> ForwardResult {
    GatedDeltaForwardOptions options;
    options.segments = segments;
    options.wait_groups = wait_groups;
    options.persistent = mode;
    const Status st = gated_delta_chunked_forward(o.ptr, s1.ptr, with_init ? s0.ptr : nullptr,
                                                  dq.ptr, dk.ptr, dv.ptr, dg.ptr, db.ptr, N, H, G,
                                                  D, ws, ws_bytes, stream, nullptr, vb, options);
    EXPECT_TRUE(st.ok()) << st.error();
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    return {o.download(), s1.download()};
  };
  const ForwardResult base = forward(GatedDeltaPersistent::never);
  for (uint32_t c : ready_counters(ws, ws_bytes)) ASSERT_EQ(c, 0xFFFFFFFFu) << "default path";
  dv.upload(v_other);
  const ForwardResult other = forward(GatedDeltaPersistent::always);
  dv.upload(v);
  const ForwardResult r = forward(GatedDeltaPersistent::always);
  EXPECT_FALSE(same_bits(other.o, r.o)) << "other values of v, same output";
  EXPECT_TRUE(same_bits(r.o, base.o)) << "o differs from the default path's";
  EXPECT_TRUE(same_bits(r.state, base.state)) << "state_final differs from the default path's";
  const Comparison eo = compare(r.o, base.o), es = compare(r.state, base.state);
  std::printf("  persistent vs default: o nmse %.3e, state nmse %.3e\n", eo.nmse, es.nmse);

  const std::vector<uint32_t> ready = ready_counters(ws, ws_bytes);
  if (persistent) {
    int used = 0;
    long total = 0;
    while (used < 64 && ready[used] != 0xFFFFFFFFu) total += ready[used++];
    EXPECT_GE(used, 2) << "wait groups counted";
    for (int s = 0; s < used; ++s)
      EXPECT_TRUE(ready[s] > 0 && ready[s] % H == 0) << "group " << s << ": " << ready[s];
    for (int s = used; s < 64; ++s) EXPECT_EQ(ready[s], 0xFFFFFFFFu) << "counter " << s;
    EXPECT_EQ(total, (long)H * NC) << "prepare blocks counted";
    const int ng = std::min(wait_groups > 0 ? wait_groups : 64, NC);  // even groups
    EXPECT_EQ(used, ng);
    for (int s = 0; s < std::min(used, ng); ++s)
      EXPECT_EQ(ready[s], (uint32_t)H * (uint32_t)((long)NC * (s + 1) / ng - (long)NC * s / ng))
          << "group " << s;
    std::printf("  %d wait groups, %ld prepare blocks counted\n", used, total);
  } else {
    for (uint32_t c : ready) ASSERT_EQ(c, 0xFFFFFFFFu) << "expected the pipeline (fallback)";
  }

  // The CPU recurrence on the chosen query heads, packed as heads 0..R−1.
  if (ref_heads.empty())
    for (int h = 0; h < H; ++h) ref_heads.push_back(h);
  const int R = (int)ref_heads.size();
  std::vector<float> qr((size_t)N * R * D), kr(qr.size()), vr(qr.size()), gr((size_t)N * R),
      br(gr.size()), ir((size_t)R * D * D), o_ref(qr.size()), s_ref(ir.size()), o_got(qr.size()),
      s_got(ir.size());
  for (int j = 0; j < R; ++j) {
    const int h = ref_heads[j], hk = h / (H / G);
    for (int n = 0; n < N; ++n) {
      const size_t dst = ((size_t)n * R + j) * D;
      std::copy_n(q.begin() + ((size_t)n * H + h) * D, D, qr.begin() + dst);
      std::copy_n(k.begin() + ((size_t)n * G + hk) * D, D, kr.begin() + dst);
      std::copy_n(v.begin() + ((size_t)n * G + hk) * D, D, vr.begin() + dst);
      std::copy_n(r.o.begin() + ((size_t)n * H + h) * D, D, o_got.begin() + dst);
      gr[(size_t)n * R + j] = g[(size_t)n * H + h];
      br[(size_t)n * R + j] = beta[(size_t)n * H + h];
    }
    std::copy_n(init.begin() + (size_t)h * D * D, (size_t)D * D, ir.begin() + (size_t)j * D * D);
    std::copy_n(r.state.begin() + (size_t)h * D * D, (size_t)D * D,
                s_got.begin() + (size_t)j * D * D);
  }
  cpu::gated_delta_recurrent_forward<float>(o_ref.data(), s_ref.data(),
                                            with_init ? ir.data() : nullptr, qr.data(), kr.data(),
                                            vr.data(), gr.data(), br.data(), N, R, D, D);
  expect_close(o_got, o_ref, 5e-3, "o (persistent)");
  expect_close(s_got, s_ref, 5e-3, "state_final (persistent)");
  cudaStreamDestroy(stream);
  cudaFree(ws);
}

// 16 segments: 1061 tokens (17 chunks: 16 segments of 1 chunk and one of 2, a ragged last
// chunk), H = 32, G = 8, D = 128 (value_block 64, 64 blocks) and D = 64 (value_block 32,
// 64 blocks); an initial state and a final state throughout. The same at about 8K and 32K
// tokens is the `Long` pair below, apart so that compute-sanitizer racecheck (which needs
// minutes for a 32K-token state pass) can run the short ones: the kernels, their shared-memory
// ring and their waits are the same, only the number of chunks differs.
TEST(CudaGatedDeltaForward, PersistentD128) {
  REQUIRE_GPU();
  persistent_vs_default({64 * 16 + 37, 32, 8, 128, -0.1f, 0.0f}, 0, true, 16, 90, true);
}
TEST(CudaGatedDeltaForward, PersistentD64) {
  REQUIRE_GPU();
  persistent_vs_default({64 * 16 + 37, 32, 8, 64, -0.1f, 0.0f}, 0, true, 16, 93, true);
}
TEST(CudaGatedDeltaForward, PersistentLongD128) {
  REQUIRE_GPU();
  persistent_vs_default({8192 + 13, 32, 8, 128, -0.05f, 0.0f}, 0, true, 16, 91, true,
                        {0, 9, 31});
  persistent_vs_default({32768 - 5, 32, 8, 128, -0.02f, 0.0f}, 0, true, 16, 92, true,
                        {0, 17, 31});
}
TEST(CudaGatedDeltaForward, PersistentLongD64) {
  REQUIRE_GPU();
  persistent_vs_default({8192, 32, 8, 64, -0.05f, 0.0f}, 0, false, 16, 94, true, {1, 12, 30});
  persistent_vs_default({32768 - 29, 32, 8, 64, -0.02f, 0.0f}, 0, true, 16, 95, true,
                        {3, 20, 31});
}
// Other prepare launches and slices: more launches than chunks (2 chunks: the state pass waits
// for both wait groups before its first chunk), 4 launches, value_block 32 at D = 128 (H = 16: 64
// blocks) and 64 at D = 64, fewer heads, no initial state. The automatic launches (at about 8K
// tokens) and 16 launches of about 4K tokens are PersistentLongSegments: under racecheck a
// prepare of that size outlasts the state pass's 8.6 s watchdog (a trap, by design; session 13).
TEST(CudaGatedDeltaForward, PersistentSegmentsAndSlices) {
  REQUIRE_GPU();
  persistent_vs_default({100, 4, 1, 128, -0.1f, 0.0f}, 0, true, 16, 97, true);
  persistent_vs_default({64 * 16 + 37, 8, 2, 128, -0.1f, 0.0f}, 0, true, 4, 98, true);
  persistent_vs_default({2100, 16, 4, 128, -0.1f, 0.0f}, 32, true, 16, 99, true, {0, 15});
  persistent_vs_default({2100, 4, 2, 64, -0.1f, 0.0f}, 64, true, 7, 100, true);
}
// Wait groups (options.wait_groups) against the prepare launches: 64 groups of 1–2 chunks under
// 16 launches, 3 groups under 16 launches, more groups than chunks (2 chunks, 64 asked: 2), 64
// groups under 3 launches.
TEST(CudaGatedDeltaForward, PersistentWaitGroups) {
  REQUIRE_GPU();
  persistent_vs_default({64 * 100 + 37, 32, 8, 128, -0.1f, 0.0f}, 0, true, 16, 120, true,
                        {0, 31}, 64);
  persistent_vs_default({64 * 16 + 37, 8, 2, 128, -0.1f, 0.0f}, 0, true, 16, 121, true, {}, 3);
  persistent_vs_default({100, 4, 1, 128, -0.1f, 0.0f}, 0, true, 16, 122, true, {}, 64);
  persistent_vs_default({2100, 4, 2, 64, -0.1f, 0.0f}, 64, false, 3, 123, true, {}, 64);
}
TEST(CudaGatedDeltaForward, PersistentLongSegments) {
  REQUIRE_GPU();
  persistent_vs_default({8192 + 13, 32, 8, 128, -0.05f, 0.0f}, 0, false, 0, 96, true,
                        {5});
  persistent_vs_default({4096 + 100, 32, 8, 128, -0.05f, 0.0f}, 0, true, 16, 106, true,
                        {2, 30});
}
// Where the persistent pass must not run, the pipeline does (same bits, counters untouched):
// value_block 16 (256 blocks: more than SMs − 8) and 128.
TEST(CudaGatedDeltaForward, PersistentFallbacks) {
  REQUIRE_GPU();
  persistent_vs_default({64 * 16 + 37, 32, 8, 128, -0.1f, 0.0f}, 16, true, 16, 101, false,
                        {0, 31});
  persistent_vs_default({64 * 16 + 37, 4, 1, 128, -0.1f, 0.0f}, 128, true, 16, 102, false);
}
// Under stream capture the persistent pass is not used (a graph gives no guarantee that its
// branches run concurrently): a captured persistent-mode forward replays to the uncaptured
// default's bits and leaves the counters untouched.
TEST(CudaGatedDeltaForward, PersistentNotCaptured) {
  REQUIRE_GPU();
  const int N = 64 * 16 + 37, H = 8, G = 2, D = 128;
  GatedDeltaForwardOptions options;
  options.segments = 16;
  std::vector<float> q = random_floats((size_t)N * H * D, 110, -1, 1);
  std::vector<float> k = random_floats((size_t)N * G * D, 111, -1, 1);
  std::vector<float> v = random_floats((size_t)N * G * D, 112, -1, 1);
  std::vector<float> g = random_floats((size_t)N * H, 113, -0.1f, 0.0f);
  std::vector<float> beta = random_floats((size_t)N * H, 114, 0.02f, 0.98f);
  unit_rows(q, D), unit_rows(k, D);
  DevB dq(q.size()), dk(k.size()), dv(v.size()), o((size_t)N * H * D);
  DevF dg(g.size()), db(beta.size()), s1((size_t)H * D * D);
  dq.upload(q), dk.upload(k), dv.upload(v), dg.upload(g), db.upload(beta);
  const size_t ws_bytes = gated_delta_forward_workspace_bytes(N, H, D, false);
  void* ws = nullptr;
  ASSERT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(ws, 0xFF, ws_bytes), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // legacy-stream work before a non-blocking one
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  auto call = [&] {
    return gated_delta_chunked_forward(o.ptr, s1.ptr, nullptr, dq.ptr, dk.ptr, dv.ptr, dg.ptr,
                                       db.ptr, N, H, G, D, ws, ws_bytes, stream, nullptr, 0,
                                       options);
  };
  options.persistent = GatedDeltaPersistent::never;
  ASSERT_OK(call());  // the pipeline, uncaptured (creates this thread's side streams)
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const std::vector<float> o_base = o.download(), s_base = s1.download();
  options.persistent = GatedDeltaPersistent::always;
  ASSERT_EQ(cudaMemset(o.ptr, 0, o.n * sizeof(__nv_bfloat16)), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const Status st = call();
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_OK(st);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_TRUE(same_bits(o.download(), o_base));
  EXPECT_TRUE(same_bits(s1.download(), s_base));
  for (uint32_t c : ready_counters(ws, ws_bytes)) EXPECT_EQ(c, 0xFFFFFFFFu);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  cudaFree(ws);
}

// The backward with the forward's state pass at value_block 64.
TEST(CudaGatedDeltaBackward, ForwardSlice64) {
  REQUIRE_GPU();
  run_backward({520, 4, 1, 128, -0.02f, 0.0f}, 60, {64, 32});
  run_backward({300, 8, 2, 128, -0.5f, 0.0f}, 61, {64, 0, false});
  run_backward({150, 4, 2, 64, -0.3f, 0.0f}, 62, {64, 32});
}

// Timing at the bench shapes (H = 32, G = 8, D = 128): forward per value_block, and forward +
// backward per (value_block, reverse_value_block). Not a check: run with
// --gtest_also_run_disabled_tests; GDN_TIMING_T="8192,32768" picks the lengths.
TEST(CudaGatedDeltaBackward, DISABLED_Timing) {
  REQUIRE_GPU();
  const int H = 32, G = 8, D = 128;
  std::vector<int> lens = {2048, 4096, 8192, 16384, 32768};
  if (const char* env = std::getenv("GDN_TIMING_T")) {
    lens.clear();
    for (const char* p = env; *p;) {
      lens.push_back(std::atoi(p));
      while (*p && *p != ',') ++p;
      if (*p == ',') ++p;
    }
  }
  const int Nmax = *std::max_element(lens.begin(), lens.end());
  auto fill = [](size_t n, uint64_t seed, float lo, float hi) {
    std::vector<float> v(n);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (auto& e : v) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      e = lo + (hi - lo) * (float)((x >> 40) * (1.0 / 16777216.0));
    }
    return v;
  };
  const float s = 1.0f / std::sqrt((float)D);
  DevB q((size_t)Nmax * H * D), k((size_t)Nmax * G * D), v((size_t)Nmax * G * D),
      dO((size_t)Nmax * H * D), o((size_t)Nmax * H * D);
  DevF g((size_t)Nmax * H), beta((size_t)Nmax * H);
  q.upload(fill(q.n, 1, -s, s)), k.upload(fill(k.n, 2, -s, s)), v.upload(fill(v.n, 3, -1, 1));
  dO.upload(fill(dO.n, 4, -1, 1)), g.upload(fill(g.n, 5, -0.3f, 0.0f)),
      beta.upload(fill(beta.n, 6, 0.05f, 0.95f));
  DevF gq((size_t)Nmax * H * D), gk((size_t)Nmax * G * D), gv((size_t)Nmax * G * D),
      gg((size_t)Nmax * H), gb((size_t)Nmax * H);
  const size_t ws_bytes = gated_delta_backward_workspace_bytes(Nmax, H, D);
  void* ws = nullptr;
  ASSERT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  auto time_ms = [&](auto&& fn, int reps) {
    for (int i = 0; i < 2; ++i) fn();
    std::vector<float> t;
    for (int i = 0; i < reps; ++i) {
      cudaEventRecord(e0);
      fn();
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  // GDN_TIMING_DEFAULT_ONLY: only the default configurations (for a profiler's per-kernel table).
  const bool default_only = std::getenv("GDN_TIMING_DEFAULT_ONLY") != nullptr;
  std::vector<int> fwd_blocks = {16, 32, 64, 128};
  std::vector<GatedDeltaBackwardOptions> bwd_options;
  if (default_only) {
    fwd_blocks = {0};
    bwd_options = {GatedDeltaBackwardOptions{}};
  } else {
    for (bool ck : {true, false})
      for (int vb : {32, 64})
        for (int rvb : {16, 32, 64, 128}) bwd_options.push_back({vb, rvb, ck});
  }
  for (int N : lens) {
    for (int vb : fwd_blocks) {
      const float ms = time_ms([&] {
        const Status st = gated_delta_chunked_forward(o.ptr, nullptr, nullptr, q.ptr, k.ptr, v.ptr,
                                                      g.ptr, beta.ptr, N, H, G, D, ws, ws_bytes,
                                                      nullptr, nullptr, vb);
        EXPECT_TRUE(st.ok()) << st.error();
      }, 10);
      std::printf("TIMING T=%d fwd vb=%d %.3f ms\n", N, vb, ms);
    }
    for (const GatedDeltaBackwardOptions& opt : bwd_options) {
      const float ms = time_ms([&] {
        const Status st =
            gated_delta_backward(gq.ptr, gk.ptr, gv.ptr, gg.ptr, gb.ptr, dO.ptr, q.ptr, k.ptr, v.ptr,
                                 g.ptr, beta.ptr, N, H, G, D, ws, ws_bytes, nullptr, opt);
        EXPECT_TRUE(st.ok()) << st.error();
      }, 5);
      std::printf("TIMING T=%d fwd+bwd vb=%d rvb=%d bf16ck=%d %.3f ms\n", N, opt.value_block,
                  opt.reverse_value_block, (int)opt.bf16_checkpoints, ms);
    }
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto dq_host = gq.download();  // finite: the timed inputs are in range
  for (size_t i = 0; i < (size_t)lens.back() * H * D; i += 997)
    ASSERT_TRUE(std::isfinite(dq_host[i]));
  cudaFree(ws);
}

}  // namespace
}  // namespace golinear::kernels::cuda
