#include "kernels/cpu/gated_linear.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/block_gemm.h"
#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/linear_state.h"

namespace golinear::kernels::cpu {

template <class S>
void gated_linear_state_update(S* state, const S* k, const S* v, const S* g, int Dk, int Dv) {
  for (int d = 0; d < Dk; ++d) {
    const S alpha = g ? std::exp(g[d]) : S(1);
    S* row = state + (long)d * Dv;
    for (int e = 0; e < Dv; ++e) row[e] = alpha * row[e] + k[d] * v[e];
  }
}

template <class S>
void gated_linear_recurrent_forward(S* o, S* state_final, const S* state_init, const S* q,
                                    const S* k, const S* v, const S* g, int N, int H, int Dk,
                                    int Dv) {
  const long state_size = (long)Dk * Dv;
#pragma omp parallel for schedule(static) if ((long)N * H * Dk * Dv >= kParallelMinWork)
  for (int h = 0; h < H; ++h) {
    std::vector<S> state(state_size, S(0));
    if (state_init) std::copy_n(state_init + h * state_size, state_size, state.begin());
    for (int n = 0; n < N; ++n) {
      const long row = (long)n * H + h;
      gated_linear_state_update(state.data(), k + row * Dk, v + row * Dv,
                                g ? g + row * Dk : nullptr, Dk, Dv);
      linear_state_query(o + row * Dv, state.data(), q + row * Dk, Dk, Dv);
    }
    if (state_final) std::copy(state.begin(), state.end(), state_final + h * state_size);
  }
}

template <class S>
void gated_linear_chunked_forward(S* o, S* state_final, const S* state_init, const S* q,
                                  const S* k, const S* v, const S* g, int N, int H, int Dk,
                                  int Dv) {
  const long state_size = (long)Dk * Dv;
  const int chunk = kLinearStateChunk;
#pragma omp parallel for schedule(static) if ((long)N * H * Dk * Dv >= kParallelMinWork)
  for (int h = 0; h < H; ++h) {
    std::vector<S> state(state_size, S(0));  // S_0 of the current chunk
    if (state_init) std::copy_n(state_init + h * state_size, state_size, state.begin());
    std::vector<S> b((long)chunk * Dk, S(0));  // (L, Dk) cumulative log decay
    std::vector<S> qdecay(Dk);
    for (int c0 = 0; c0 < N; c0 += chunk) {
      const int L = std::min(chunk, N - c0);
      auto at = [&](int i) { return (long)(c0 + i) * H + h; };
      if (g) {
        for (int i = 0; i < L; ++i)
          for (int d = 0; d < Dk; ++d)
            b[(long)i * Dk + d] = (i > 0 ? b[(long)(i - 1) * Dk + d] : S(0)) + g[at(i) * Dk + d];
      }
      for (int i = 0; i < L; ++i) {
        const S* qi = q + at(i) * Dk;
        const S* bi = b.data() + (long)i * Dk;
        S* oi = o + at(i) * Dv;
        for (int d = 0; d < Dk; ++d) qdecay[d] = qi[d] * std::exp(bi[d]);
        linear_state_query(oi, state.data(), qdecay.data(), Dk, Dv);
        for (int m = 0; m <= i; ++m) {
          const S* km = k + at(m) * Dk;
          const S* bm = b.data() + (long)m * Dk;
          S a = S(0);
          for (int d = 0; d < Dk; ++d) a += qi[d] * km[d] * std::exp(bi[d] - bm[d]);
          const S* vm = v + at(m) * Dv;
          for (int e = 0; e < Dv; ++e) oi[e] += a * vm[e];
        }
      }
      const S* blast = b.data() + (long)(L - 1) * Dk;
      for (int d = 0; d < Dk; ++d) {
        S* row = state.data() + (long)d * Dv;
        const S decay = std::exp(blast[d]);
        for (int e = 0; e < Dv; ++e) row[e] *= decay;
        for (int m = 0; m < L; ++m) {
          const S kd = k[at(m) * Dk + d] * std::exp(blast[d] - b[(long)m * Dk + d]);
          const S* vm = v + at(m) * Dv;
          for (int e = 0; e < Dv; ++e) row[e] += kd * vm[e];
        }
      }
    }
    if (state_final) std::copy(state.begin(), state.end(), state_final + h * state_size);
  }
}

template <class S>
void gated_linear_backward(S* dq, S* dk, S* dv, S* dg, const S* dout, const S* q, const S* k,
                           const S* v, const S* g, int N, int H, int Dk, int Dv) {
  const long state_size = (long)Dk * Dv;
  const int chunk = kLinearStateChunk;
  const int segments = (N + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if ((long)N * H * Dk * Dv >= kParallelMinWork)
  for (int h = 0; h < H; ++h) {
    auto row_of = [&](int n) { return (long)n * H + h; };
    auto decay_of = [&](long r) { return g ? g + r * Dk : nullptr; };
    // Forward sweep: the state entering every segment, (segments, Dk, Dv).
    std::vector<S> entering((long)segments * state_size, S(0));
    std::vector<S> state(state_size, S(0));
    for (int n = 0; n < N; ++n) {
      if (n % chunk == 0)
        std::copy(state.begin(), state.end(), entering.begin() + (n / chunk) * state_size);
      const long r = row_of(n);
      gated_linear_state_update(state.data(), k + r * Dk, v + r * Dv, decay_of(r), Dk, Dv);
    }
    // Backward sweep; dS is the gradient w.r.t. the state after token n.
    std::vector<S> dS(state_size, S(0));
    std::vector<S> states((long)chunk * state_size);
    for (int seg = segments - 1; seg >= 0; --seg) {
      const int n0 = seg * chunk, L = std::min(chunk, N - n0);
      const S* S_enter = entering.data() + seg * state_size;
      for (int i = 0; i < L; ++i) {
        const S* prev = i > 0 ? states.data() + (i - 1) * state_size : S_enter;
        std::copy_n(prev, state_size, states.begin() + i * state_size);
        const long r = row_of(n0 + i);
        gated_linear_state_update(states.data() + i * state_size, k + r * Dk, v + r * Dv,
                                  decay_of(r), Dk, Dv);
      }
      for (int i = L - 1; i >= 0; --i) {
        const long r = row_of(n0 + i);
        const S* Sn = states.data() + i * state_size;
        const S* P = i > 0 ? states.data() + (i - 1) * state_size : S_enter;
        const S* qn = q + r * Dk;
        const S* kn = k + r * Dk;
        const S* vn = v + r * Dv;
        const S* don = dout + r * Dv;
        // o_n = S_nᵀ q_n, then S_n = diag(α) P + k vᵀ.
        for (int d = 0; d < Dk; ++d) {
          const S* row = Sn + (long)d * Dv;
          const S* prow = P + (long)d * Dv;
          S* drow = dS.data() + (long)d * Dv;
          S dq_d = S(0), dk_d = S(0), dS_dot_P = S(0);
          const S alpha = g ? std::exp(g[r * Dk + d]) : S(1);
          for (int e = 0; e < Dv; ++e) {
            dq_d += row[e] * don[e];
            drow[e] += qn[d] * don[e];
            dk_d += drow[e] * vn[e];
            dv[r * Dv + e] += kn[d] * drow[e];
            dS_dot_P += drow[e] * prow[e];
            drow[e] *= alpha;  // now the gradient w.r.t. S_{n−1}
          }
          dq[r * Dk + d] += dq_d;
          dk[r * Dk + d] += dk_d;
          if (g) dg[r * Dk + d] += alpha * dS_dot_P;
        }
      }
    }
  }
}

#define GOLINEAR_INSTANTIATE(S)                                                                   \
  template void gated_linear_state_update<S>(S*, const S*, const S*, const S*, int, int);        \
  template void gated_linear_recurrent_forward<S>(S*, S*, const S*, const S*, const S*, const S*, \
                                                  const S*, int, int, int, int);                 \
  template void gated_linear_chunked_forward<S>(S*, S*, const S*, const S*, const S*, const S*,   \
                                                const S*, int, int, int, int);                   \
  template void gated_linear_backward<S>(S*, S*, S*, S*, const S*, const S*, const S*, const S*, \
                                         const S*, int, int, int, int);
GOLINEAR_INSTANTIATE(float)
GOLINEAR_INSTANTIATE(double)
#undef GOLINEAR_INSTANTIATE

// ---- fast fp32 form ----------------------------------------------------------------------------

void gated_linear_blocked_forward(float* o, float* state_final, const float* state_init,
                                  const float* q, const float* k, const float* v, const float* g,
                                  int N, int H, int Dk, int Dv) {
  const long state_size = (long)Dk * Dv;
  const int chunk = kLinearStateChunk, ldk = H * Dk, ldv = H * Dv;
#pragma omp parallel for schedule(static) if ((long)N * H * Dk * Dv >= kParallelMinWork)
  for (int h = 0; h < H; ++h) {
    std::vector<float> state(state_size, 0.0f);  // S_0 of the current chunk, (Dk, Dv)
    if (state_init) std::copy_n(state_init + h * state_size, state_size, state.begin());
    std::vector<float> b((long)chunk * Dk, 0.0f);  // (L, Dk) cumulative log decay
    std::vector<float> scaled((long)chunk * Dk);   // (L, Dk) q ⊙ e^{b}, then k ⊙ e^{b_{L−1} − b}
    std::vector<float> scores((long)chunk * chunk);  // (L, L) lower triangle incl. the diagonal
    std::vector<float> term(Dk);
    for (int c0 = 0; c0 < N; c0 += chunk) {
      const int L = std::min(chunk, N - c0);
      const float* qc = q + ((long)c0 * H + h) * Dk;
      const float* kc = k + ((long)c0 * H + h) * Dk;
      const float* vc = v + ((long)c0 * H + h) * Dv;
      float* oc = o + ((long)c0 * H + h) * Dv;
      if (g) {
        const float* gc = g + ((long)c0 * H + h) * Dk;
        for (int i = 0; i < L; ++i)
          for (int d = 0; d < Dk; ++d)
            b[(long)i * Dk + d] = (i > 0 ? b[(long)(i - 1) * Dk + d] : 0.0f) + gc[(long)i * ldk + d];
      }
      // o = (Q ⊙ e^{b}) S_0 + scores V.
      for (int i = 0; i < L; ++i) {
        const float* qi = qc + (long)i * ldk;
        const float* bi = b.data() + (long)i * Dk;
        float* si = scaled.data() + (long)i * Dk;
#pragma omp simd
        for (int d = 0; d < Dk; ++d) si[d] = qi[d] * exp_vectorizable(bi[d]);
      }
      block_gemm(false, false, L, Dv, Dk, 1.0f, scaled.data(), Dk, state.data(), Dv, 0.0f, oc, ldv);
      for (int i = 0; i < L; ++i) {
        const float* qi = qc + (long)i * ldk;
        const float* bi = b.data() + (long)i * Dk;
        float* row = scores.data() + (long)i * chunk;
        for (int m = 0; m <= i; ++m) {
          const float* km = kc + (long)m * ldk;
          const float* bm = b.data() + (long)m * Dk;
#pragma omp simd
          for (int d = 0; d < Dk; ++d) term[d] = qi[d] * km[d] * exp_vectorizable(bi[d] - bm[d]);
          float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
          int d = 0;
          for (; d + 4 <= Dk; d += 4) {
            a0 += term[d], a1 += term[d + 1], a2 += term[d + 2], a3 += term[d + 3];
          }
          for (; d < Dk; ++d) a0 += term[d];
          row[m] = (a0 + a1) + (a2 + a3);
        }
        for (int m = i + 1; m < L; ++m) row[m] = 0.0f;
      }
      block_gemm(false, false, L, Dv, L, 1.0f, scores.data(), chunk, vc, ldv, 1.0f, oc, ldv);
      // S_next = diag(e^{b_{L−1}}) S_0 + (K ⊙ e^{b_{L−1} − b})ᵀ V.
      const float* blast = b.data() + (long)(L - 1) * Dk;
      for (int d = 0; d < Dk; ++d) {
        const float decay = std::exp(blast[d]);
        float* row = state.data() + (long)d * Dv;
        for (int e = 0; e < Dv; ++e) row[e] *= decay;
      }
      for (int m = 0; m < L; ++m) {
        const float* km = kc + (long)m * ldk;
        const float* bm = b.data() + (long)m * Dk;
        float* sm = scaled.data() + (long)m * Dk;
#pragma omp simd
        for (int d = 0; d < Dk; ++d) sm[d] = km[d] * exp_vectorizable(blast[d] - bm[d]);
      }
      block_gemm(true, false, Dk, Dv, L, 1.0f, scaled.data(), Dk, vc, ldv, 1.0f, state.data(), Dv);
    }
    if (state_final) std::copy(state.begin(), state.end(), state_final + h * state_size);
  }
}

}  // namespace golinear::kernels::cpu
