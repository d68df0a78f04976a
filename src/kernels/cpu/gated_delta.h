// The gated delta rule (Gated DeltaNet), the state update of the hybrid mixer's linear branch
// (DESIGN.md §3). One state S (Dk, Dv) per head h, N tokens:
//
//   S_n = α_n (I − β_n k_n k_nᵀ) S_{n−1} + β_n k_n v_nᵀ,   α_n = exp(g_n),   S_{−1} = S_init or 0
//   o_n = S_nᵀ q_n                        (query n reads the state after key n has entered)
//
// Layouts, time first: q, k (N, H, Dk); v, o (N, H, Dv); g, beta (N, H); states (H, Dk, Dv).
// The hybrid's delayed read y_t = q̂_tᵀ S_{t−w} is this kernel on shifted pointers (query rows
// start w + s tokens later than key rows, see mixers/hybrid_mixer.cpp); the kernel only knows
// "query n reads the state after key n".
//
// Two forms of one forward, which must agree: the token-by-token recurrence (decode; the
// specification) and the chunked WY/UT form of flash-linear-attention's chunk_gated_delta_rule
// (prefill and training). Templated on the scalar (float, double: fp64 for gradient checks).
//
// Gradient convention: every backward accumulates (+=) into its gradient outputs.
#pragma once

namespace golinear::kernels::cpu {

// One token into one head's state: S (Dk, Dv) ← α (I − β k kᵀ) S + β k vᵀ with α = exp(g).
// k (Dk), v (Dv), scratch (Dv).
template <class S>
void gated_delta_state_update(S* state, const S* k, const S* v, S g, S beta, int Dk, int Dv,
                              S* scratch);

// The recurrence token by token. state_init (H, Dk, Dv) or null (zero state); state_final
// (H, Dk, Dv) or null receives S_{N−1}.
template <class S>
void gated_delta_recurrent_forward(S* o, S* state_final, const S* state_init, const S* q,
                                   const S* k, const S* v, const S* g, const S* beta, int N, int H,
                                   int Dk, int Dv);

// The chunked form, chunks of kLinearStateChunk tokens. Within a chunk (local index i, L tokens),
// with γ_i = Σ_{m≤i} g_m and S_0 the state entering the chunk, the delta rule unrolls to
//   S_i = e^{γ_i} S_0 + Σ_{m≤i} e^{γ_i−γ_m} k_m ũ_mᵀ,   ũ = U − W S_0,
//   (I + A) U = diag(β) V,  (I + A) W = diag(β e^{γ}) K,  A_im = β_i e^{γ_i−γ_m} k_iᵀk_m (m < i),
// (I + A) unit lower triangular, solved by forward substitution (U = T β V, W = T β e^γ K with
// T = (I + A)⁻¹), then
//   o_i = e^{γ_i} S_0ᵀ q_i + Σ_{m≤i} e^{γ_i−γ_m} (q_iᵀ k_m) ũ_m,
//   S_next = e^{γ_{L−1}} S_0 + Σ_m e^{γ_{L−1}−γ_m} k_m ũ_mᵀ.
// Same arguments as the recurrent form.
template <class S>
void gated_delta_chunked_forward(S* o, S* state_final, const S* state_init, const S* q,
                                 const S* k, const S* v, const S* g, const S* beta, int N, int H,
                                 int Dk, int Dv);

// Gradients (+=) of Σ dout·o for the forward from a zero state: dq, dk (N, H, Dk); dv (N, H, Dv);
// dg, dbeta (N, H). Backpropagates through the recurrence, segment by segment from the end: the
// state entering each segment of kLinearStateChunk tokens is kept from one forward sweep and the
// segment's states are recomputed, so memory is (N/64 + 64)·Dk·Dv per head and time O(N·Dk·Dv).
template <class S>
void gated_delta_backward(S* dq, S* dk, S* dv, S* dg, S* dbeta, const S* dout, const S* q,
                          const S* k, const S* v, const S* g, const S* beta, int N, int H, int Dk,
                          int Dv);

// The fast fp32 forms for prefill and training: the chunked WY form above on 64-token blocks,
// every product a cblas_sgemm (block_gemm.h) and the (I + A) solve a cblas_strsm, one head per
// OpenMP thread. Same arguments and results as gated_delta_chunked_forward<float> and
// gated_delta_backward<float> (the specifications; tests/kernels/linear_state_test.cpp compares
// them). The backward differentiates the chunked form chunk by chunk from the end, with the state
// entering each chunk kept from one forward sweep: (N/64)·Dk·Dv floats per head, O(N·Dk·Dv) time.
// Per chunk (notation of gated_delta_chunked_forward, P_im = e^{γ_i−γ_m} q_iᵀk_m for m ≤ i,
// K̄_m = e^{γ_{L−1}−γ_m} k_m, T = (I + A)⁻¹), given dO and dS_next:
//   dŨ = Pᵀ dO + K̄ dS_next,  dP = dO Ũᵀ,  dU = dŨ,  dW = −dŨ S_0ᵀ,
//   [dβV | dβe^γK] = Tᵀ [dU | dW],  dA = −(dβV) Uᵀ − (dβe^γK) Wᵀ (strictly lower part),
//   dS_0 = e^{γ_{L−1}} dS_next + Qᵀ diag(e^γ) dO − Wᵀ dŨ,
// and the chain rule through A, P, K̄ and the e^γ factors to q, k, v, β and γ (dg = suffix sums
// of dγ within the chunk).
void gated_delta_blocked_forward(float* o, float* state_final, const float* state_init,
                                 const float* q, const float* k, const float* v, const float* g,
                                 const float* beta, int N, int H, int Dk, int Dv);
void gated_delta_blocked_backward(float* dq, float* dk, float* dv, float* dg, float* dbeta,
                                  const float* dout, const float* q, const float* k, const float* v,
                                  const float* g, const float* beta, int N, int H, int Dk, int Dv);

}  // namespace golinear::kernels::cpu
