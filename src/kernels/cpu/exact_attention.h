// The exact branch of the hybrid mixer (DESIGN.md §3.2): RoPE and causal softmax attention over
// sinks ∪ window, templated on the scalar. In fp32 these compute what kernels/cpu/rope.h and
// kernels/cpu/attention.h compute (tests/kernels check it); they exist so that the whole mixer can
// run in fp64 for gradient checks, and they visit only the keys the mask allows (O(T·(s+w)) for
// the hybrid instead of O(T²)).
//
// Gradient convention: every backward accumulates (+=) into its gradient outputs.
#pragma once

#include "kernels/cpu/attention.h"

namespace golinear::kernels::cpu {

// x (T, N, D) rotated in place by +θ (sign 1, forward) or −θ (sign −1, the backward); token t at
// absolute position pos0 + t; inv_freq (D/2). Angles in fp32 as in rope_forward.
template <class S>
void rope_rotate_generic(S* x, const float* inv_freq, int T, int N, int D, long pos0, int sign);

// y (Tq, H, D) = softmax(q kᵀ/√D) v as attention_forward: q (Tq, H, D) at positions
// pos0 .. pos0+Tq−1, k, v (Tk, G, D) at positions 0 .. Tk−1, query head h reads kv head h/(H/G).
// lse (Tq, H), when given, receives each row's log Σ_j exp(q·k_j/√D) over the allowed keys.
template <class S>
void attention_forward_generic(S* y, const S* q, const S* k, const S* v, int Tq, int Tk, long pos0,
                               int H, int G, int D, AttentionMask mask, S* lse = nullptr);

// Gradients (+=) for attention_forward_generic with Tk = Tq = T and pos0 = 0:
// dq (T, H, D), dk, dv (T, G, D). dlse (T, H), when given, is the loss gradient with respect to
// the forward's lse: the score gradient gains dlse·p_j (∂lse/∂s_j = p_j).
template <class S>
void attention_backward_generic(S* dq, S* dk, S* dv, const S* dy, const S* q, const S* k,
                                const S* v, int T, int H, int G, int D, AttentionMask mask,
                                const S* dlse = nullptr);

}  // namespace golinear::kernels::cpu
