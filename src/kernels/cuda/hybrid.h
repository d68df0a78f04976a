// The hybrid mixer of DESIGN.md §3 on the GPU (gdn state, mix gate, conv on; the default recipe),
// built from the kernels of this folder: short_conv.h and rope.h (the fused input stage), the gate
// stage below, attention.h (exact branch), gated_delta.h (linear branch with the delayed read as
// a pointer shift), cuBLAS for the gate projections, and a fused single-token decode step over a
// constant-size cache.
// Semantics follow mixers/hybrid_mixer.h (the specification).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/cuda_common.h"

namespace golinear::kernels::cuda {

// ---- gates ---------------------------------------------------------------------------------

// logits (T, 3H) fp32 = x [w_a; w_b; w_λ]ᵀ (columns: a, b, λ) →
//   g = −exp(A_log)·softplus(a + dt_bias), β = σ(b + b_beta), λ = σ(λ-logit + b_lambda); (T, H).
Status hybrid_gates_forward(float* g, float* beta, float* lambda, const float* logits,
                            const float* A_log, const float* dt_bias, const float* b_beta,
                            const float* b_lambda, int T, int H, cudaStream_t stream);

// ---- the hybrid mixer ----------------------------------------------------------------------

struct HybridShape {
  int C = 0, H = 0, G = 0, D = 0;
  int sinks = 8, window = 56;
};

// Device parameters of one layer. Shapes as in mixers/hybrid_mixer.h; w_gates stacks
// [w_a; w_b; w_lambda] as one (3H, C) bf16 matrix so that one GEMM computes every gate logit.
struct HybridParams {
  const float* conv_q = nullptr;   // (H·D, 4)
  const float* conv_k = nullptr;   // (G·D, 4)
  const float* conv_v = nullptr;   // (G·D, 4)
  const bf16* w_gates = nullptr;   // (3H, C)
  const float* b_beta = nullptr;   // (H)
  const float* A_log = nullptr;    // (H)
  const float* dt_bias = nullptr;  // (H)
  const float* b_lambda = nullptr; // (H)
  const float* inv_freq = nullptr; // (D/2)
};

size_t hybrid_forward_workspace_bytes(const HybridShape& shape, int T);

// y (T, H, D) bf16 for a whole sequence from position 0: x (T, C), q (T, H, D), k, v (T, G, D)
// bf16 (before RoPE). state_final (H, D, D) fp32 or null: the delayed state after T tokens.
Status hybrid_forward(bf16* y, float* state_final, const HybridShape& shape,
                      const HybridParams& params, const bf16* x, const bf16* q, const bf16* k,
                      const bf16* v, int T, void* workspace, size_t workspace_bytes,
                      cublasHandle_t cublas, cudaStream_t stream);

// hybrid_forward once with CUDA events between its stages (for the bench's breakdown):
// stage_ms = {RoPE table + conv/RoPE/unit norm, gate GEMM + gates, linear branch (GDN),
// exact branch + mix}. Synchronizes the stream.
Status hybrid_forward_stage_ms(float stage_ms[4], bf16* y, const HybridShape& shape,
                               const HybridParams& params, const bf16* x, const bf16* q,
                               const bf16* k, const bf16* v, int T, void* workspace,
                               size_t workspace_bytes, cublasHandle_t cublas,
                               cudaStream_t stream);

// The decode cache of one sequence and layer: constant size, whatever the context.
struct HybridCacheView {
  long* position = nullptr;       // device counter: tokens processed
  unsigned* step_done = nullptr;  // blocks finished in the current step (0 between steps)
  float* conv_q = nullptr;        // (4, H, D) raw q of the last tokens, slot j mod 4
  float* conv_k = nullptr;        // (4, G, D)
  float* conv_v = nullptr;        // (4, G, D)
  bf16* sink_k = nullptr;         // (sinks, G, D) RoPE'd k̃
  bf16* sink_v = nullptr;         // (sinks, G, D)
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

// One token: y (H, D) bf16 from x (C), q (H, D), k, v (G, D) bf16; advances cache.position.
// One launch (the last block to finish advances the position); capture steps in a CUDA graph.
Status hybrid_decode_step(bf16* y, const HybridShape& shape, const HybridParams& params,
                          const HybridCacheView& cache, const bf16* x, const bf16* q,
                          const bf16* k, const bf16* v, cudaStream_t stream);

}  // namespace golinear::kernels::cuda
