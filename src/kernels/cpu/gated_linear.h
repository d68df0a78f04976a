// Gated linear attention with a diagonal (per key channel) decay: the state update of the GLA,
// kGLA and Hedgehog mixers (DESIGN.md §3, comparison mixers). One state S (Dk, Dv) per head h:
//
//   S_n = diag(α_n) S_{n−1} + k_n v_nᵀ,   α_n = exp(g_n) (Dk),   S_{−1} = S_init or 0
//   o_n = S_nᵀ q_n                        (query n reads the state after key n has entered)
//
// g may be null: no decay (α = 1), the plain linear attention of Hedgehog.
// Layouts, time first: q, k, g (N, H, Dk); v, o (N, H, Dv); states (H, Dk, Dv).
// As in gated_delta.h, a delayed read is the caller's pointer shift. Two forms of one forward
// (recurrent; chunked) and a backward, templated on the scalar (float, double).
//
// Gradient convention: every backward accumulates (+=) into its gradient outputs.
#pragma once

namespace golinear::kernels::cpu {

// One token into one head's state: S (Dk, Dv) ← diag(exp(g)) S + k vᵀ. k, g (Dk) (g may be
// null), v (Dv).
template <class S>
void gated_linear_state_update(S* state, const S* k, const S* v, const S* g, int Dk, int Dv);

// The recurrence token by token. state_init (H, Dk, Dv) or null; state_final (H, Dk, Dv) or null.
template <class S>
void gated_linear_recurrent_forward(S* o, S* state_final, const S* state_init, const S* q,
                                    const S* k, const S* v, const S* g, int N, int H, int Dk,
                                    int Dv);

// The chunked form, chunks of kLinearStateChunk tokens. Within a chunk (local index i), with
// b_i = Σ_{m≤i} g_m (Dk) and S_0 the entering state:
//   o_i = S_0ᵀ (q_i ⊙ e^{b_i}) + Σ_{m≤i} [Σ_d q_id k_md e^{b_id − b_md}] v_m,
//   S_next = diag(e^{b_{L−1}}) S_0 + Σ_m (k_m ⊙ e^{b_{L−1} − b_m}) v_mᵀ.
// The exponents b_i − b_m (m ≤ i) are ≤ 0, so no factor can overflow (no secondary chunking).
template <class S>
void gated_linear_chunked_forward(S* o, S* state_final, const S* state_init, const S* q,
                                  const S* k, const S* v, const S* g, int N, int H, int Dk, int Dv);

// Gradients (+=) of Σ dout·o for the forward from a zero state: dq, dk, dg (N, H, Dk) (dg
// ignored when g is null); dv (N, H, Dv). Segment-wise recomputation as in gated_delta_backward.
template <class S>
void gated_linear_backward(S* dq, S* dk, S* dv, S* dg, const S* dout, const S* q, const S* k,
                           const S* v, const S* g, int N, int H, int Dk, int Dv);

// The fast fp32 chunked forward: same arguments and result as gated_linear_chunked_forward<float>
// (its specification; tests/kernels/linear_state_blocked_test.cpp compares them). The products
// with the entering state, the intra-chunk P·V and the state update are cblas_sgemm on 64-token
// blocks; the intra-chunk scores Σ_d q_id k_md e^{b_id − b_md} (no factorization avoids overflow
// without sub-chunks) are a vectorized loop over d. The backward stays gated_linear_backward.
void gated_linear_blocked_forward(float* o, float* state_final, const float* state_init,
                                  const float* q, const float* k, const float* v, const float* g,
                                  int N, int H, int Dk, int Dv);

}  // namespace golinear::kernels::cpu
