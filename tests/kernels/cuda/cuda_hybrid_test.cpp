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
#include <vector>

#include "kernels/cuda/hybrid.h"
#include "mixers/hybrid_mixer.h"
#include "cuda_test_util.h"

namespace golinear::kernels::cuda {
namespace {

using namespace ::golinear::kernels::test;

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
