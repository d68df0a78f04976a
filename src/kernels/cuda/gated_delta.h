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
//   1 prepare (parallel over chunks × heads, 256 threads, ~70 KB shared memory: 3 blocks per SM):
//     γ = cumsum g, A = strict-lower(β e^{γi−γm} KKᵀ), T = (I + A)⁻¹ (fp32: 16×16 diagonal blocks
//     by forward substitution, then 16 → 32 → 64 by T₂₁ = −T₂₂ A₂₁ T₁₁), W = (T diag(βe^γ)) K,
//     U = (T diag(β)) V, P = lower(e^{γi−γm} QKᵀ), e^γ and e^{γ_last−γ} (mma.sync bf16 → fp32,
//     fragments in registers).
//   2 state pass (sequential over chunks, parallel over heads × value-column slices: the columns
//     of S evolve independently). One warp per 16 value columns holds Sᵀ in mma.sync registers
//     (fp32); ũ = U − W S, o = diag(e^γ) Q S + P ũ, S ← e^{γ_last} S + Kᵀ diag(e^{γ_last−γ}) ũ
//     run without leaving registers; W, Q, K, P, U tiles stream through shared memory (cp.async,
//     2–3 stages, one barrier per chunk).
// Without checkpoints the forward is pipelined: the chunks split into segments (one per 32
// chunks, at most 16; GatedDeltaForwardOptions::segments overrides, 1 turns it off) and the state pass of
// segment s runs on a high-priority side stream while the prepares of the next segments run on
// `stream`; the state is carried between segments in the workspace, and the side stream is
// joined back into `stream` before returning. The side stream and its 4 events belong to the
// calling host thread and device: created on first use outside stream capture (until then a
// captured forward runs unpipelined), destroyed when the thread exits.
// From T ≥ 8K (128 chunks; GatedDeltaForwardOptions::persistent never / always overrides) a
// persistent state pass replaces the per-segment state passes by ONE launch that carries the
// state in registers across all chunks: its blocks (at most SMs − 8 of them: value block 32 or
// 64; else the pipeline runs) wait in the kernel, before each of 64 even groups of chunks, for a
// counter that every prepare block of the group increments when done; the prepares run in 4
// launches beside it. The same arithmetic, so the same bits as the pipeline. Not under stream
// capture. The prepares are queued before it (see gated_delta.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/cuda_common.h"

namespace golinear::kernels::cuda {

inline constexpr int kGatedDeltaChunk = 64;

// Bytes of scratch gated_delta_chunked_forward needs (W, U, P, γ, e^γ per chunk and head, two
// fp32 states for the pipeline, then 256 bytes that end the size without checkpoints: 64 uint32
// counters of the persistent state pass, one per wait group, each left at H × the group's chunks
// by a persistent forward and untouched otherwise); with `checkpoints`, also the
// fp32 state entering every chunk (what the backward reads).
size_t gated_delta_forward_workspace_bytes(int N, int H, int D, bool checkpoints);

// How the chunked forward schedules its kernels; every choice computes the same values (the
// defaults are the fastest measured; the others are for tests and the mixer bench).
enum class GatedDeltaPersistent {
  automatic,  // the persistent state pass from 128 chunks on (T ≥ 8K), where usable
  never,      // always the per-segment pipeline
  always,     // the persistent state pass at every length, where usable
};
struct GatedDeltaForwardOptions {
  int segments = 0;  // pipeline segments without checkpoints: 0 one per 32 chunks (at most 16),
                     // 1 no pipeline (and no persistent pass), n > 1 n segments (at most the
                     // chunks and 64); under the persistent state pass, its prepare launches
                     // (0: 4; at most the chunks)
  GatedDeltaPersistent persistent = GatedDeltaPersistent::automatic;
  int wait_groups = 0;  // the persistent state pass: the even chunk groups it waits for, each
                        // counted when all its prepares are done (0: 64; at most the chunks and
                        // 64)
  bool staged_prepare = true;  // the prepare kernel stages W, U through shared memory (false: its
                               // fragment stores, slower)
};

// o (N, H, D) bf16. state_init (H, D, D) fp32 or null (zero); state_final (H, D, D) fp32 or null.
// checkpoints (H, ⌈N/64⌉, D, D) fp32 or null: the state entering each chunk.
// value_block: value columns per state-pass block (16, 32, 64, or 128 when D = 128; 0 picks 64
// for D = 128, 32 for D = 64).
Status gated_delta_chunked_forward(bf16* o, float* state_final, const float* state_init,
                                   const bf16* q, const bf16* k, const bf16* v, const float* g,
                                   const float* beta, int N, int H, int G, int D, void* workspace,
                                   size_t workspace_bytes, cudaStream_t stream,
                                   float* checkpoints = nullptr, int value_block = 0,
                                   const GatedDeltaForwardOptions& options = {});

// The token-by-token recurrence over N tokens (the decode form; also a second forward to test
// against). state (H, D, D) fp32 in/out (zero it for a fresh sequence); o (N, H, D) bf16.
Status gated_delta_recurrent_forward(bf16* o, float* state, const bf16* q, const bf16* k,
                                     const bf16* v, const float* g, const float* beta, int N,
                                     int H, int G, int D, cudaStream_t stream);

// Bytes of scratch gated_delta_backward needs: the forward's scratch, T = (I + A)⁻¹ per chunk,
// the state entering every chunk (room for fp32), the gradient of the state leaving every chunk
// (bf16), dŨ per chunk (bf16) and the recomputed output: about (N/64)·D²·6 + N·D·10 bytes per
// head.
size_t gated_delta_backward_workspace_bytes(int N, int H, int D);

// Gradients of Σ dout·o for the forward from a zero state, all fp32 and WRITTEN (=):
// dq (N, H, D); dk, dv (N, G, D) (summed over the query heads of each group); dg, dbeta (N, H).
// Chunked (the WY form of cpu::gated_delta_blocked_backward), three steps:
//   1 the chunked forward (kernels 1, 2), keeping the state entering each chunk and T (skipped
//     with options.forward_kept: gated_delta_forward_for_backward ran it);
//   2 reverse state pass (kernel 3; sequential over chunks from the end, parallel over heads ×
//     value-column slices, dS in mma registers as kernel 2 holds S): per chunk it writes dS (the
//     gradient of the state leaving the chunk) and dŨ = Pᵀ dO + K̄ dS, then
//     dS ← e^{γ_last} dS + Qᵀ diag(e^γ) dO − Wᵀ dŨ;
//   3 chunk-parallel gradients (kernel 4; grid chunks × kv heads, mma.sync bf16 → fp32, every product
//     of the CPU's per-chunk backward): dq, dg, dβ per query head; dk, dv summed over the group's
//     query heads in order by the one block that owns those rows — deterministic, no atomics.
// Dynamic shared memory: kernel 4 takes ~213 KB for D = 128 (one block per SM).
struct GatedDeltaBackwardOptions {
  int value_block = 0;          // the forward's state-pass slice (0: 32; as the forward's)
  int reverse_value_block = 0;  // value columns per reverse-pass block: 16, 32, 64, 128 ≤ D
                                // (0: 32)
  bool bf16_checkpoints = true;  // keep the states entering the chunks as bf16 Sᵀ (false: fp32 S)
  // Step 1 already ran: the workspace holds what gated_delta_forward_for_backward left there for
  // these inputs (under the same value_block and bf16_checkpoints); the backward starts at step 2.
  bool forward_kept = false;
};
// Step 1 of gated_delta_backward on its own, for a trainer whose forward feeds the backward: the
// chunked forward (o (N, H, D) bf16, from a zero state) keeping the state entering each chunk and
// T in `workspace` (gated_delta_backward_workspace_bytes), so that gated_delta_backward with
// options.forward_kept (the same inputs, options and workspace, nothing written there between)
// does not compute the forward again. The gradients are those of the backward alone, bit for bit.
Status gated_delta_forward_for_backward(bf16* o, const bf16* q, const bf16* k, const bf16* v,
                                        const float* g, const float* beta, int N, int H, int G,
                                        int D, void* workspace, size_t workspace_bytes,
                                        cudaStream_t stream,
                                        const GatedDeltaBackwardOptions& options = {});
Status gated_delta_backward(float* dq, float* dk, float* dv, float* dg, float* dbeta,
                            const bf16* dout, const bf16* q, const bf16* k, const bf16* v,
                            const float* g, const float* beta, int N, int H, int G, int D,
                            void* workspace, size_t workspace_bytes, cudaStream_t stream,
                            const GatedDeltaBackwardOptions& options = {});

}  // namespace golinear::kernels::cuda
