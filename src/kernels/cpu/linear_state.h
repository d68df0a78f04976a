// Pieces shared by the linear-state kernels (gated_delta.h, gated_linear.h): how a query reads a
// state and the chunk length of the chunked forms and of the backward's checkpoints.
//
// A state is one (Dk, Dv) row-major matrix per head: S = Σ_n (decay) k_n v_nᵀ.
#pragma once

namespace golinear::kernels::cpu {

// Tokens per chunk of the chunked forward forms, and per recomputed segment of the backwards.
inline constexpr int kLinearStateChunk = 64;

// Multiply-adds below which a kernel stays on one thread: for the tiny shapes of tests and decode,
// waking threads costs more than it saves (and thrashes when cores are shared).
inline constexpr long kParallelMinWork = 1L << 18;

// o (Dv) = Sᵀ q: a query q (Dk) reads a state S (Dk, Dv).
template <class S>
inline void linear_state_query(S* o, const S* state, const S* q, int Dk, int Dv) {
  for (int e = 0; e < Dv; ++e) o[e] = S(0);
  for (int d = 0; d < Dk; ++d) {
    const S qd = q[d];
    const S* row = state + (long)d * Dv;
    for (int e = 0; e < Dv; ++e) o[e] += qd * row[e];
  }
}

}  // namespace golinear::kernels::cpu
