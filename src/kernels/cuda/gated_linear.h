// Gated linear attention with a diagonal (per key channel) decay on the GPU: the state update of
// the GLA, kGLA and Hedgehog mixers. Same math as kernels/cpu/gated_linear.h (the specification):
//
//   S_n = diag(exp(g_n)) S_{n−1} + k_n v_nᵀ,   o_n = S_nᵀ q_n,   S_{−1} = S_init or 0.
//
// g may be null: no decay (the plain linear attention of Hedgehog). Layouts, time first:
// q, k (N, H, Dk) bf16; g (N, H, Dk) fp32; v, o (N, H, Dv) bf16; states (H, Dk, Dv) fp32.
// Dk, Dv ∈ {64, 128} (independently). No GQA (as the CPU reference). g ≤ 0 is assumed (GLA's
// logsigmoid/16, kGLA's decays): every exponential below is then ≤ 1.
//
// Chunked forward (chunks of 64, bf16 tensor-core operands via wmma m16n16k16, fp32 accumulate):
//   1 prepare (grid chunks × heads): b = cumsum g in the chunk (fp32); q̄ = q ⊙ e^b,
//     k̄ = k ⊙ e^{b_last − b}, e^{b_last}; the intra-chunk scores A (64×64, lower incl. diagonal)
//     with secondary chunks of 16 (as flash-linear-attention's GLA): for a query sub-chunk I
//     and an earlier key sub-chunk J < I, A = (q ⊙ e^{b − b_{I0}}) (k ⊙ e^{b_{I0} − b})ᵀ with I0
//     the first position of I (both factors ≤ 1); the four diagonal 16×16 blocks are computed
//     exactly in fp32 (Σ_d q k e^{b_i − b_m}, no factorization). No exponent is ever positive.
//   2 state pass (sequential over chunks, parallel over heads × 64×32 state tiles; fp32 state in
//     shared memory, 4-stage cp.async prefetch): stores the state entering each chunk (bf16
//     checkpoints), S ← diag(e^{b_last}) S + k̄ᵀ V.
//   3 output (grid chunks × heads): o = q̄ S_c + A V.
// H200, H = 32, Dk = Dv = 128, T = 32768 (2026-11-29): forward 3.2 ms; backward kernels prepare
// 1.7, state pass 0.9, reverse pass 1.3, dq 3.4, dk/dv/dg 6.1 ms (dq and dk/dv/dg hold ~180 and
// ~210 KB of shared memory: one block per SM, loads not overlapped: the next thing to speed up).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/cuda_common.h"

namespace golinear::kernels::cuda {

inline constexpr int kGatedLinearChunk = 64;

// Bytes of scratch gated_linear_chunked_forward needs: q̄, k̄ (bf16, N·H·Dk each), A (bf16, 64²
// per chunk and head), e^{b_last} and the bf16 state entering every chunk (⌈N/64⌉·H·Dk·Dv).
size_t gated_linear_forward_workspace_bytes(int N, int H, int Dk, int Dv);

// o (N, H, Dv) bf16. state_init (H, Dk, Dv) fp32 or null (zero); state_final (H, Dk, Dv) fp32 or
// null. g (N, H, Dk) fp32 or null (no decay).
Status gated_linear_chunked_forward(bf16* o, float* state_final, const float* state_init,
                                    const bf16* q, const bf16* k, const bf16* v, const float* g,
                                    int N, int H, int Dk, int Dv, void* workspace,
                                    size_t workspace_bytes, cudaStream_t stream);

// The token-by-token recurrence over N tokens (the decode form; also a second forward to test
// against). state (H, Dk, Dv) fp32 in/out (zero it for a fresh sequence); o (N, H, Dv) bf16.
Status gated_linear_recurrent_forward(bf16* o, float* state, const bf16* q, const bf16* k,
                                      const bf16* v, const float* g, int N, int H, int Dk, int Dv,
                                      cudaStream_t stream);

// Bytes of scratch gated_linear_backward needs: the forward's, the gradient of the state leaving
// every chunk (bf16), dA (bf16 64² per chunk and head) and per-chunk row dots (fp32).
size_t gated_linear_backward_workspace_bytes(int N, int H, int Dk, int Dv);

// Gradients of Σ dout·o for the forward from a zero state, all fp32 and WRITTEN (=), the
// convention of kernels/cuda (the CPU reference accumulates: zero its outputs to compare):
// dq, dk (N, H, Dk); dv (N, H, Dv); dg (N, H, Dk) (ignored, may be null, when g is null).
// Deterministic (no atomics). Steps:
//   1 the forward's prepare and state pass (checkpoints of the entering states);
//   2 reverse state pass (same kernel as 2, from the end): dS of the state leaving each chunk,
//     dS ← diag(e^{b_last}) dS + q̄ᵀ dO, and the row dots Σ_e S_next ∘ dS (the part of dg carried
//     across chunk boundaries);
//   3 dq per chunk: dA = lower(dO Vᵀ), dq = e^b ⊙ (dO S_cᵀ) + Σ_{m≤i} dA_im k_m ⊙ e^{b_i − b_m}
//     (the same sub-chunk split as A);
//   4 dk, dv, dg per chunk: dv = Aᵀ dO + k̄ dS, dk = e^{b_last − b} ⊙ (V dSᵀ) +
//     Σ_{i≥m} dA_im q_i ⊙ e^{b_i − b_m} (key sub-chunk J against later query rows with the
//     reference at J's last position), dg = (reverse cumsum in the chunk of q⊙dq − k⊙dk) +
//     the row dots: dg_t = Σ_{n≥t} (q_n ⊙ dq_n − k_n ⊙ dk_n) over the whole sequence.
Status gated_linear_backward(float* dq, float* dk, float* dv, float* dg, const bf16* dout,
                             const bf16* q, const bf16* k, const bf16* v, const float* g, int N,
                             int H, int Dk, int Dv, void* workspace, size_t workspace_bytes,
                             cudaStream_t stream);

// The backward with each kernel timed by CUDA events on `stream` (synchronizes): ms[0] prepare,
// [1] state pass, [2] reverse state pass, [3] dq, [4] dk/dv/dg. For benchmarks and tests.
Status gated_linear_backward_stage_ms(float ms[5], float* dq, float* dk, float* dv, float* dg,
                                      const bf16* dout, const bf16* q, const bf16* k,
                                      const bf16* v, const float* g, int N, int H, int Dk, int Dv,
                                      void* workspace, size_t workspace_bytes,
                                      cudaStream_t stream);

}  // namespace golinear::kernels::cuda
