// The hybrid mixer's own kernels (DESIGN.md §3; mixers/hybrid_mixer.h is the specification):
// its gates, its mixing (forward, backward, fused with the attention-transfer loss), its decode
// cache and the fused decode step over a batch of such caches. mixers/cuda/hybrid_mixer.h
// composes them with the op families of this folder into the GPU mixer.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/cuda_common.h"

namespace golinear::kernels::cuda {

// How the two branches combine: y = a·y_exact + b·y_lin per (t, h) with
//   gate   a = 1 − λ, b = λ   (gate-lse too: λ then also sees the exact branch's lse)
//   add    a = 1, b = 1
//   scale  a = 1, b = γ_h
//   exact  a = 1, b = 0       (no linear branch: mixer none)
//   linear a = 0, b = 1       (no exact branch: sinks = window = 0)
enum class HybridMix : int { gate = 0, add = 1, scale = 2, exact = 3, linear = 4 };

struct HybridShape {
  int C = 0, H = 0, G = 0, D = 0;
  int sinks = 8, window = 56;
  HybridMix mix = HybridMix::gate;
  bool linear_rope = false;  // the linear branch reads RoPE'd q̃, k̃
  bool count_far = false;    // mix split: λ-logit += a·log n_far(t), λ = 0 while n_far(t) ≤ 0
  bool has_exact() const { return mix != HybridMix::linear; }
  bool has_linear() const { return mix != HybridMix::exact; }
};

// Device parameters of one layer (pointers into the mixer's parameter block; null where the
// recipe has no such tensor). The gate weights present are one stacked (R, C) bf16 matrix so that
// one GEMM computes every gate logit: rows [0, H) w_a and [H, 2H) w_b when the linear branch is
// there, then w_lambda at rows [lambda_row, lambda_row + H) for the gate mixes (lambda_row < 0:
// none).
struct HybridParams {
  const float* conv_q = nullptr;   // (H·D, 4), null: no conv (q̃ = q)
  const float* conv_k = nullptr;   // (G·D, 4)
  const float* conv_v = nullptr;   // (G·D, 4)
  const bf16* w_gates = nullptr;   // (R, C)
  int R = 0, lambda_row = -1;
  const float* b_beta = nullptr;   // (H)
  const float* A_log = nullptr;    // (H)
  const float* dt_bias = nullptr;  // (H)
  const float* b_lambda = nullptr; // (H) gate mixes
  const float* c_lse = nullptr;    // (H) gate-lse, split
  const float* a_far = nullptr;    // (H) split: the log n_far coefficient
  const float* gamma = nullptr;    // (H) scale
  const float* inv_freq = nullptr; // (D/2)
};

// logits (T, R) fp32 = x w_gatesᵀ → any of (null: not computed), all (T, H):
//   g = −exp(A_log)·softplus(a + dt_bias), β = σ(b + b_beta)            (columns 0, H)
//   λ = σ(λ-logit + b_lambda − c_lse·lse [+ a_far·log n_far(t)])        (column lambda_row)
// c_lse and lse (T, H) null: no lse term. far_start ≥ 0 (mix split, = sinks + window; a_far
// (H) given): row t is position t and n_far(t) = t − far_start + 1, λ = 0 exactly where that is
// ≤ 0; < 0: no such term. lambda_logit: λ receives the logit λ-logit + b_lambda alone (no lse or
// far term, no σ), for attention_forward_mixed to finish with the lse (AttentionMixGate).
Status hybrid_gates_forward(float* g, float* beta, float* lambda, const float* logits, int R,
                            int lambda_row, const float* A_log, const float* dt_bias,
                            const float* b_beta, const float* b_lambda, const float* c_lse,
                            const float* lse, const float* a_far, int far_start, int T, int H,
                            cudaStream_t stream, bool lambda_logit = false);

// y (T, H, D) = a·y_exact + b·y_lin (see HybridMix), into y32 (fp32) and/or y16 (bf16), either
// may be null. lambda (T, H) for the gate mix, gamma (H) for scale; y_lin unread for exact,
// y_exact for linear.
Status hybrid_mix_forward(float* y32, bf16* y16, HybridMix mix, const bf16* y_exact,
                          const bf16* y_lin, const float* lambda, const float* gamma, int T, int H,
                          int D, cudaStream_t stream);
// From dy (T, H, D) fp32: dy_exact (fp32) = a·dy, dy_lin (bf16, the GDN backward's input) = b·dy
// (either null when its branch is absent); the coefficient's gradient per (t, h) into
// dcoef[t·dcoef_stride + h]: gate ∂/∂(λ-logit) = Σ_d dy (y_lin − y_exact)·λ(1 − λ), scale
// ∂/∂γ_h's row term Σ_d dy·y_lin; not written for add, exact, linear.
Status hybrid_mix_backward(float* dy_exact, bf16* dy_lin, float* dcoef, int dcoef_stride,
                           HybridMix mix, const float* dy, const bf16* y_exact, const bf16* y_lin,
                           const float* lambda, const float* gamma, int T, int H, int D,
                           cudaStream_t stream);
// The mix fused with the attention-transfer loss (no y or dy buffer): sums[0] = Σ (y − t)²,
// sums[1] = Σ t² (fp64, fixed order) for y as hybrid_mix_forward computes it against the bf16
// teacher (T, H, D) (workspace: nmse_workspace_bytes of loss.h).
Status hybrid_mix_nmse_forward(double* sums, HybridMix mix, const bf16* y_exact,
                               const bf16* y_lin, const float* lambda, const float* gamma,
                               const bf16* teacher, int T, int H, int D, void* workspace,
                               size_t workspace_bytes, cudaStream_t stream);
// hybrid_mix_backward of dy = scale · 2 (y − t) / max(sums[1], 1e-12), y recomputed as above.
Status hybrid_mix_nmse_backward(float* dy_exact, bf16* dy_lin, float* dcoef, int dcoef_stride,
                                HybridMix mix, const double* sums, float scale,
                                const bf16* teacher, const bf16* y_exact, const bf16* y_lin,
                                const float* lambda, const float* gamma, int T, int H, int D,
                                cudaStream_t stream);

// Backward of hybrid_gates_forward, one block per head, sums over T in order (deterministic).
// dlogits (T, R): its λ column holds ∂/∂(λ-logit) on entry (hybrid_mix_backward writes it) and
// stays; the a, b columns are WRITTEN when dg is given. += into the per-head gradients given
// (null: skipped): dA_log, ddt_bias, db_beta (from dg, dbeta), db_lambda and dc_lse (from the λ
// column); dlse (T, H) is WRITTEN = −c_lse·∂/∂(λ-logit) (gate-lse: the lse's gradient, which the
// exact branch's backward takes); da_far (split, far_start ≥ 0) += Σ_t ∂/∂(λ-logit)·log n_far(t).
Status hybrid_gates_backward(float* dlogits, int R, int lambda_row, float* dA_log,
                             float* ddt_bias, float* db_beta, float* db_lambda, float* dc_lse,
                             float* dlse, float* da_far, const float* dg, const float* dbeta,
                             const float* logits, const float* g, const float* beta,
                             const float* A_log, const float* dt_bias, const float* c_lse,
                             const float* lse, int far_start, int T, int H, cudaStream_t stream);
// out (H) += Σ_t src[t·stride + h], in order (scale's ∂/∂γ from hybrid_mix_backward's rows).
Status hybrid_head_sum(float* out, const float* src, int stride, int T, int H,
                       cudaStream_t stream);

// The decode cache of one sequence and layer: constant size, whatever the context. Slots are
// carved for every recipe (a recipe without a branch leaves its slots unused).
struct HybridCacheView {
  long* position = nullptr;       // device counter: tokens processed
  unsigned* step_done = nullptr;  // blocks finished in the current step (0 between steps)
  float* conv_q = nullptr;        // (4, H, D) raw q of the last tokens, slot j mod 4
  float* conv_k = nullptr;        // (4, G, D)
  float* conv_v = nullptr;        // (4, G, D)
  bf16* sink_k = nullptr;         // (max(1, sinks), G, D) RoPE'd k̃
  bf16* sink_v = nullptr;         // (max(1, sinks), G, D)
  bf16* ring_k = nullptr;         // (window + 1, G, D) RoPE'd k̃, slot j mod (window + 1)
  bf16* ring_v = nullptr;         // (window + 1, G, D) ṽ
  bf16* ring_key = nullptr;       // (window + 1, G, D) unit key k̂ (state entry)
  float* ring_g = nullptr;        // (window + 1, H) log decay
  float* ring_beta = nullptr;     // (window + 1, H)
  float* state = nullptr;         // (H, D, D)
};

// Bytes of one cache (the number the bench reports per layer).
size_t hybrid_cache_bytes(const HybridShape& shape);
// Carves a zeroed cache out of `memory` (hybrid_cache_bytes of it).
Result<HybridCacheView> hybrid_cache_create(const HybridShape& shape, void* memory,
                                            cudaStream_t stream);

// After a whole-sequence forward over T tokens from position 0 whose final delayed state went to
// cache.state: the rest of the cache as T decode steps would leave it, copied from the forward's
// own rows: raw q, k, v (T, ·, D) bf16 (conv history), kr (T, G, D) RoPE'd k̃, vc (T, G, D) ṽ,
// kn (T, G, D) the state's unit keys, g, beta (T, H) (either null without a linear branch).
Status hybrid_cache_fill(const HybridCacheView& cache, const HybridShape& shape, const bf16* q,
                         const bf16* k, const bf16* v, const bf16* kr, const bf16* vc,
                         const bf16* kn, const float* g, const float* beta, int T,
                         cudaStream_t stream);

// How a decode launch is made.
struct HybridDecodeLaunch {
  // The blocks each head's state columns are spread over, 1 or D / 32 (the same bits either
  // way); 0 chooses D / 32 while the batch's heads are at most half the GPU's SMs. A split block
  // holds the window's rows in shared memory: past ≈ 500 keys (D = 128) it runs unsplit.
  int column_splits = 0;
  // Launched as a programmatic dependent of the kernel before it (launch.h): its blocks start
  // while that kernel ends and, before they wait for it, read the weights and the caches (their
  // position, state, window and conv history). The caller promises that no kernel that may still
  // run writes those caches: true in a decode step whose first kernel is an ordinary launch and
  // in which only each layer's decode kernel writes its caches (gpu_decode_batch); not between
  // two decode steps of the same caches, each of which starts the next at once.
  bool dependent = false;
};

// One token: y (H, D) bf16 from x (C), q (H, D), k, v (G, D) bf16; advances cache.position.
// One launch (the last block to finish advances the position); capture steps in a CUDA graph.
// Any sinks + window ≤ kHybridDecodeMaxKeys − 1.
inline constexpr int kHybridDecodeMaxKeys = 4096;
Status hybrid_decode_step(bf16* y, const HybridShape& shape, const HybridParams& params,
                          const HybridCacheView& cache, const bf16* x, const bf16* q,
                          const bf16* k, const bf16* v, cudaStream_t stream,
                          const HybridDecodeLaunch& how = {});
// The same for each of B sequences in one launch: y (B, H, D) from x (B, C), q (B, H, D), k, v
// (B, G, D); caches (B) a device array of views, each advanced by one position.
Status hybrid_decode_step_batch(bf16* y, const HybridShape& shape, const HybridParams& params,
                                const HybridCacheView* caches, int B, const bf16* x,
                                const bf16* q, const bf16* k, const bf16* v, cudaStream_t stream,
                                const HybridDecodeLaunch& how = {});

}  // namespace golinear::kernels::cuda
