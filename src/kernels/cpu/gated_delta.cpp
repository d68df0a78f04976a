#include "kernels/cpu/gated_delta.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/linear_state.h"

namespace golinear::kernels::cpu {

template <class S>
void gated_delta_state_update(S* state, const S* k, const S* v, S g, S beta, int Dk, int Dv,
                              S* scratch) {
  const S alpha = std::exp(g);
  // r = Sᵀ k (Dv); S ← α S − α β k rᵀ + β k vᵀ = α S + k uᵀ with u = β (v − α r).
  S* u = scratch;
  for (int e = 0; e < Dv; ++e) u[e] = S(0);
  for (int d = 0; d < Dk; ++d) {
    const S* row = state + (long)d * Dv;
    for (int e = 0; e < Dv; ++e) u[e] += k[d] * row[e];
  }
  for (int e = 0; e < Dv; ++e) u[e] = beta * (v[e] - alpha * u[e]);
  for (int d = 0; d < Dk; ++d) {
    S* row = state + (long)d * Dv;
    for (int e = 0; e < Dv; ++e) row[e] = alpha * row[e] + k[d] * u[e];
  }
}

template <class S>
void gated_delta_recurrent_forward(S* o, S* state_final, const S* state_init, const S* q,
                                   const S* k, const S* v, const S* g, const S* beta, int N, int H,
                                   int Dk, int Dv) {
  const long state_size = (long)Dk * Dv;
#pragma omp parallel for schedule(static) if ((long)N * H * Dk * Dv >= kParallelMinWork)
  for (int h = 0; h < H; ++h) {
    std::vector<S> state(state_size, S(0)), scratch(Dv);
    if (state_init) std::copy_n(state_init + h * state_size, state_size, state.begin());
    for (int n = 0; n < N; ++n) {
      const long row = (long)n * H + h;
      gated_delta_state_update(state.data(), k + row * Dk, v + row * Dv, g[row], beta[row], Dk, Dv,
                               scratch.data());
      linear_state_query(o + row * Dv, state.data(), q + row * Dk, Dk, Dv);
    }
    if (state_final) std::copy(state.begin(), state.end(), state_final + h * state_size);
  }
}

template <class S>
void gated_delta_chunked_forward(S* o, S* state_final, const S* state_init, const S* q,
                                 const S* k, const S* v, const S* g, const S* beta, int N, int H,
                                 int Dk, int Dv) {
  const long state_size = (long)Dk * Dv;
  const int chunk = kLinearStateChunk;
#pragma omp parallel for schedule(static) if ((long)N * H * Dk * Dv >= kParallelMinWork)
  for (int h = 0; h < H; ++h) {
    std::vector<S> state(state_size, S(0));  // S_0 of the current chunk, (Dk, Dv)
    if (state_init) std::copy_n(state_init + h * state_size, state_size, state.begin());
    std::vector<S> gamma(chunk);                  // (L) cumulative log decay
    std::vector<S> A((long)chunk * chunk);        // (L, L) strictly lower β_i e^{γ_i−γ_m} k_iᵀk_m
    std::vector<S> U((long)chunk * Dv);           // (L, Dv), becomes ũ = U − W S_0
    std::vector<S> W((long)chunk * Dk);           // (L, Dk)
    for (int c0 = 0; c0 < N; c0 += chunk) {
      const int L = std::min(chunk, N - c0);
      auto at = [&](int i) { return (long)(c0 + i) * H + h; };  // row of local token i
      S acc = S(0);
      for (int i = 0; i < L; ++i) gamma[i] = acc += g[at(i)];

      for (int i = 0; i < L; ++i) {
        const S* ki = k + at(i) * Dk;
        for (int m = 0; m < i; ++m) {
          const S* km = k + at(m) * Dk;
          S dot = S(0);
          for (int d = 0; d < Dk; ++d) dot += ki[d] * km[d];
          A[(long)i * chunk + m] = beta[at(i)] * std::exp(gamma[i] - gamma[m]) * dot;
        }
      }
      // Forward substitution: row i of U and W after rows m < i.
      for (int i = 0; i < L; ++i) {
        const S b = beta[at(i)], bdecay = b * std::exp(gamma[i]);
        S* Ui = U.data() + (long)i * Dv;
        S* Wi = W.data() + (long)i * Dk;
        const S* vi = v + at(i) * Dv;
        const S* ki = k + at(i) * Dk;
        for (int e = 0; e < Dv; ++e) Ui[e] = b * vi[e];
        for (int d = 0; d < Dk; ++d) Wi[d] = bdecay * ki[d];
        for (int m = 0; m < i; ++m) {
          const S a = A[(long)i * chunk + m];
          const S* Um = U.data() + (long)m * Dv;
          const S* Wm = W.data() + (long)m * Dk;
          for (int e = 0; e < Dv; ++e) Ui[e] -= a * Um[e];
          for (int d = 0; d < Dk; ++d) Wi[d] -= a * Wm[d];
        }
      }
      // ũ_i = U_i − S_0ᵀ W_i.
      for (int i = 0; i < L; ++i) {
        S* Ui = U.data() + (long)i * Dv;
        const S* Wi = W.data() + (long)i * Dk;
        for (int d = 0; d < Dk; ++d) {
          const S* row = state.data() + (long)d * Dv;
          for (int e = 0; e < Dv; ++e) Ui[e] -= Wi[d] * row[e];
        }
      }
      // Outputs: inter-chunk part from S_0, intra-chunk part from ũ.
      for (int i = 0; i < L; ++i) {
        const S* qi = q + at(i) * Dk;
        S* oi = o + at(i) * Dv;
        linear_state_query(oi, state.data(), qi, Dk, Dv);
        const S decay_i = std::exp(gamma[i]);
        for (int e = 0; e < Dv; ++e) oi[e] *= decay_i;
        for (int m = 0; m <= i; ++m) {
          const S* km = k + at(m) * Dk;
          S dot = S(0);
          for (int d = 0; d < Dk; ++d) dot += qi[d] * km[d];
          const S a = std::exp(gamma[i] - gamma[m]) * dot;
          const S* Um = U.data() + (long)m * Dv;
          for (int e = 0; e < Dv; ++e) oi[e] += a * Um[e];
        }
      }
      // State entering the next chunk.
      const S decay_last = std::exp(gamma[L - 1]);
      for (long x = 0; x < state_size; ++x) state[x] *= decay_last;
      for (int m = 0; m < L; ++m) {
        const S* km = k + at(m) * Dk;
        const S* Um = U.data() + (long)m * Dv;
        const S decay = std::exp(gamma[L - 1] - gamma[m]);
        for (int d = 0; d < Dk; ++d) {
          const S kd = decay * km[d];
          S* row = state.data() + (long)d * Dv;
          for (int e = 0; e < Dv; ++e) row[e] += kd * Um[e];
        }
      }
    }
    if (state_final) std::copy(state.begin(), state.end(), state_final + h * state_size);
  }
}

template <class S>
void gated_delta_backward(S* dq, S* dk, S* dv, S* dg, S* dbeta, const S* dout, const S* q,
                          const S* k, const S* v, const S* g, const S* beta, int N, int H, int Dk,
                          int Dv) {
  const long state_size = (long)Dk * Dv;
  const int chunk = kLinearStateChunk;
  const int segments = (N + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if ((long)N * H * Dk * Dv >= kParallelMinWork)
  for (int h = 0; h < H; ++h) {
    auto row_of = [&](int n) { return (long)n * H + h; };
    // Forward sweep: the state entering every segment, (segments, Dk, Dv).
    std::vector<S> entering((long)segments * state_size, S(0));
    std::vector<S> state(state_size, S(0)), scratch(Dv);
    for (int n = 0; n < N; ++n) {
      if (n % chunk == 0) std::copy(state.begin(), state.end(), entering.begin() + (n / chunk) * state_size);
      const long r = row_of(n);
      gated_delta_state_update(state.data(), k + r * Dk, v + r * Dv, g[r], beta[r], Dk, Dv,
                               scratch.data());
    }
    // Backward sweep. dS is the gradient w.r.t. the state after token n.
    std::vector<S> dS(state_size, S(0));
    std::vector<S> states((long)chunk * state_size);  // S_n after each token of the segment
    std::vector<S> r_vec(Dv), kdS(Dv);
    for (int seg = segments - 1; seg >= 0; --seg) {
      const int n0 = seg * chunk, L = std::min(chunk, N - n0);
      const S* S_enter = entering.data() + seg * state_size;
      std::copy_n(S_enter, state_size, states.begin());
      for (int i = 0; i < L; ++i) {
        if (i > 0) std::copy_n(states.begin() + (i - 1) * state_size, state_size, states.begin() + i * state_size);
        const long r = row_of(n0 + i);
        gated_delta_state_update(states.data() + i * state_size, k + r * Dk, v + r * Dv, g[r],
                                 beta[r], Dk, Dv, scratch.data());
      }
      for (int i = L - 1; i >= 0; --i) {
        const long r = row_of(n0 + i);
        const S* Sn = states.data() + i * state_size;                     // S_n
        const S* P = i > 0 ? states.data() + (i - 1) * state_size : S_enter;  // S_{n−1}
        const S* qn = q + r * Dk;
        const S* kn = k + r * Dk;
        const S* vn = v + r * Dv;
        const S* don = dout + r * Dv;
        // o_n = S_nᵀ q_n: dq_n += S_n do_n, dS += q_n do_nᵀ.
        for (int d = 0; d < Dk; ++d) {
          const S* row = Sn + (long)d * Dv;
          S* drow = dS.data() + (long)d * Dv;
          S acc = S(0);
          for (int e = 0; e < Dv; ++e) {
            acc += row[e] * don[e];
            drow[e] += qn[d] * don[e];
          }
          dq[r * Dk + d] += acc;
        }
        // S_n = α (P − β k rᵀ) + β k vᵀ with r = Pᵀ k.
        const S alpha = std::exp(g[r]), b = beta[r];
        for (int e = 0; e < Dv; ++e) r_vec[e] = kdS[e] = S(0);
        for (int d = 0; d < Dk; ++d) {
          const S* prow = P + (long)d * Dv;
          const S* drow = dS.data() + (long)d * Dv;
          for (int e = 0; e < Dv; ++e) {
            r_vec[e] += kn[d] * prow[e];
            kdS[e] += kn[d] * drow[e];  // kdS = dSᵀ k
          }
        }
        S dbeta_n = S(0), dalpha = S(0);
        for (int e = 0; e < Dv; ++e) {
          dbeta_n += kdS[e] * (vn[e] - alpha * r_vec[e]);
          dv[r * Dv + e] += b * kdS[e];
          dalpha -= b * kdS[e] * r_vec[e];
        }
        for (int d = 0; d < Dk; ++d) {
          const S* prow = P + (long)d * Dv;
          const S* drow = dS.data() + (long)d * Dv;
          S dS_dot_P = S(0), dS_dot_u = S(0), P_dot_kdS = S(0);
          for (int e = 0; e < Dv; ++e) {
            dS_dot_P += drow[e] * prow[e];
            dS_dot_u += drow[e] * (vn[e] - alpha * r_vec[e]);
            P_dot_kdS += prow[e] * kdS[e];
          }
          dalpha += dS_dot_P;
          dk[r * Dk + d] += b * dS_dot_u - alpha * b * P_dot_kdS;
        }
        dbeta[r] += dbeta_n;
        dg[r] += alpha * dalpha;
        // dS_{n−1} = α (dS − β k (dSᵀ k)ᵀ).
        for (int d = 0; d < Dk; ++d) {
          S* drow = dS.data() + (long)d * Dv;
          for (int e = 0; e < Dv; ++e) drow[e] = alpha * (drow[e] - b * kn[d] * kdS[e]);
        }
      }
    }
  }
}

#define GOLINEAR_INSTANTIATE(S)                                                                    \
  template void gated_delta_state_update<S>(S*, const S*, const S*, S, S, int, int, S*);          \
  template void gated_delta_recurrent_forward<S>(S*, S*, const S*, const S*, const S*, const S*,  \
                                                 const S*, const S*, int, int, int, int);         \
  template void gated_delta_chunked_forward<S>(S*, S*, const S*, const S*, const S*, const S*,    \
                                               const S*, const S*, int, int, int, int);           \
  template void gated_delta_backward<S>(S*, S*, S*, S*, S*, const S*, const S*, const S*,         \
                                        const S*, const S*, const S*, int, int, int, int);
GOLINEAR_INSTANTIATE(float)
GOLINEAR_INSTANTIATE(double)
#undef GOLINEAR_INSTANTIATE

}  // namespace golinear::kernels::cpu
