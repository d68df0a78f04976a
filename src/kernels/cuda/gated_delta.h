// Gated DeltaNet (the gated delta rule) on the GPU: chunked forward (WY/UT form, chunks of 64,
// fp32 state), its backward, and the recurrent single-token step. Same math as
// kernels/cpu/gated_delta.h (the specification):
//
//   S_n = α_n (I − β_n k_n k_nᵀ) S_{n−1} + β_n k_n v_nᵀ,  α_n = exp(g_n),  o_n = S_nᵀ q_n.
//
// Layouts, time first: q, o (N, H, D); k, v (N, G, D) with query head h reading kv head
// h / (H / G) (GQA without copying keys); g, beta (N, H) fp32; states (H, D, D) fp32.
// The hybrid's delayed read is these kernels on shifted pointers, as on the CPU.
//
// Chunked forward, two kernels:
//   1 prepare (parallel over chunks × heads, 256 threads): γ = cumsum g, A = strict-lower(β e^{γi−γm}
//     KKᵀ), T = (I + A)⁻¹ (fp32: 16×16 diagonal blocks by forward substitution, then block rows),
//     W = T diag(βe^γ) K, U = T diag(β) V and P = lower(e^{γi−γm} QKᵀ) (wmma bf16 → fp32).
//   2 state pass (sequential over chunks, parallel over heads × value-column slices: the columns
//     of S evolve independently). One warp per 16 value columns holds Sᵀ in mma.sync registers
//     (fp32); ũ = U − W S, o = diag(e^γ) Q S + P ũ, S ← e^{γ_last} S + Kᵀ diag(e^{γ_last−γ}) ũ
//     run without leaving registers; W, Q, K, P, U tiles stream through shared memory (cp.async,
//     2–3 stages, one barrier per chunk).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/cuda_common.h"

namespace golinear::kernels::cuda {

inline constexpr int kGatedDeltaChunk = 64;

// Bytes of scratch gated_delta_chunked_forward needs (W, U, P, γ per chunk and head); with
// `checkpoints`, also the fp32 state entering every chunk (what the backward reads).
size_t gated_delta_forward_workspace_bytes(int N, int H, int D, bool checkpoints);

// o (N, H, D) bf16. state_init (H, D, D) fp32 or null (zero); state_final (H, D, D) fp32 or null.
// checkpoints (H, ⌈N/64⌉, D, D) fp32 or null: the state entering each chunk.
// value_block: value columns per state-pass block (16, 32, 64, or 128 when D = 128; 0 picks 64
// for D = 128, 32 for D = 64).
Status gated_delta_chunked_forward(bf16* o, float* state_final, const float* state_init,
                                   const bf16* q, const bf16* k, const bf16* v, const float* g,
                                   const float* beta, int N, int H, int G, int D, void* workspace,
                                   size_t workspace_bytes, cudaStream_t stream,
                                   float* checkpoints = nullptr, int value_block = 0);

// The token-by-token recurrence over N tokens (the decode form; also a second forward to test
// against). state (H, D, D) fp32 in/out (zero it for a fresh sequence); o (N, H, D) bf16.
Status gated_delta_recurrent_forward(bf16* o, float* state, const bf16* q, const bf16* k,
                                     const bf16* v, const float* g, const float* beta, int N,
                                     int H, int G, int D, cudaStream_t stream);

// Bytes of scratch gated_delta_backward needs: the forward's chunk checkpoints plus 64
// recomputed states per head.
size_t gated_delta_backward_workspace_bytes(int N, int H, int D);

// Gradients of Σ dout·o for the forward from a zero state, all fp32 and WRITTEN (=):
// dq (N, H, D); dk, dv (N, G, D) (summed over the query heads of each group); dg, dbeta (N, H).
// Runs the chunked forward for the checkpoints, then sweeps each 64-token segment backwards
// from its recomputed states (one block per head, the state in registers).
Status gated_delta_backward(float* dq, float* dk, float* dv, float* dg, float* dbeta,
                            const bf16* dout, const bf16* q, const bf16* k, const bf16* v,
                            const float* g, const float* beta, int N, int H, int G, int D,
                            void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace golinear::kernels::cuda
