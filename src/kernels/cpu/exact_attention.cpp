#include "kernels/cpu/exact_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/linear_state.h"

namespace golinear::kernels::cpu {

namespace {

// The keys a query at position t may see, as at most two ranges [begin, end) of key positions.
struct KeyRanges {
  long begin[2] = {0, 0}, end[2] = {0, 0};
};

KeyRanges allowed_keys(AttentionMask mask, long t, long Tk) {
  KeyRanges r;
  const long last = std::min(t + 1, Tk);
  if (mask.window < 0) {
    r.end[0] = last;
    return r;
  }
  r.end[0] = std::min<long>(mask.sinks, last);                  // sinks j < s
  r.begin[1] = std::max<long>(mask.sinks, t - mask.window + 1);  // window t − w < j ≤ t
  r.end[1] = std::max(r.begin[1], last);
  return r;
}

}  // namespace

template <class S>
void rope_rotate_generic(S* x, const float* inv_freq, int T, int N, int D, long pos0, int sign) {
  const int half = D / 2;
  for (int t = 0; t < T; ++t) {
    for (int i = 0; i < half; ++i) {
      const float angle = (float)(pos0 + t) * inv_freq[i];
      const S c = std::cos((S)angle), s = (S)sign * std::sin((S)angle);
      for (int n = 0; n < N; ++n) {
        S* row = x + ((long)t * N + n) * D;
        const S a = row[i], b = row[i + half];
        row[i] = a * c - b * s;
        row[i + half] = b * c + a * s;
      }
    }
  }
}

template <class S>
void attention_forward_generic(S* y, const S* q, const S* k, const S* v, int Tq, int Tk, long pos0,
                               int H, int G, int D, AttentionMask mask, S* lse) {
  const int group = H / G;
  const S scale = S(1) / std::sqrt((S)D);
  const long keys = mask.window < 0 ? Tk : std::min<long>(Tk, mask.sinks + mask.window);
#pragma omp parallel if ((long)Tq * H * D * keys >= kParallelMinWork)
  {
    std::vector<S> p(Tk);
#pragma omp for collapse(2) schedule(static)
    for (int t = 0; t < Tq; ++t) {
      for (int h = 0; h < H; ++h) {
        const KeyRanges keys = allowed_keys(mask, pos0 + t, Tk);
        const int g = h / group;
        const S* qv = q + ((long)t * H + h) * D;
        S maxs = -INFINITY;
        for (int r = 0; r < 2; ++r) {
          for (long j = keys.begin[r]; j < keys.end[r]; ++j) {
            const S* kv = k + (j * G + g) * D;
            S s = S(0);
            for (int d = 0; d < D; ++d) s += qv[d] * kv[d];
            p[j] = s * scale;
            maxs = std::max(maxs, p[j]);
          }
        }
        S* out = y + ((long)t * H + h) * D;
        std::fill(out, out + D, S(0));
        S denom = S(0);
        for (int r = 0; r < 2; ++r) {
          for (long j = keys.begin[r]; j < keys.end[r]; ++j) {
            const S e = std::exp(p[j] - maxs);
            denom += e;
            const S* vv = v + (j * G + g) * D;
            for (int d = 0; d < D; ++d) out[d] += e * vv[d];
          }
        }
        for (int d = 0; d < D; ++d) out[d] /= denom;
        if (lse) lse[(long)t * H + h] = maxs + std::log(denom);
      }
    }
  }
}

template <class S>
void attention_backward_generic(S* dq, S* dk, S* dv, const S* dy, const S* q, const S* k,
                                const S* v, int T, int H, int G, int D, AttentionMask mask,
                                const S* dlse) {
  const int group = H / G;
  const S scale = S(1) / std::sqrt((S)D);
  // Parallel over kv heads: dk and dv of kv head g are written only by the queries of its group.
  const long keys = mask.window < 0 ? T : std::min<long>(T, mask.sinks + mask.window);
#pragma omp parallel for schedule(static) if ((long)T * H * D * keys >= kParallelMinWork)
  for (int g = 0; g < G; ++g) {
    std::vector<S> p(T), dp(T);
    for (int h = g * group; h < (g + 1) * group; ++h) {
      for (int t = 0; t < T; ++t) {
        const KeyRanges keys = allowed_keys(mask, t, T);
        const S* qv = q + ((long)t * H + h) * D;
        const S* dyv = dy + ((long)t * H + h) * D;
        S maxs = -INFINITY;
        for (int r = 0; r < 2; ++r) {
          for (long j = keys.begin[r]; j < keys.end[r]; ++j) {
            const S* kv = k + (j * G + g) * D;
            S s = S(0);
            for (int d = 0; d < D; ++d) s += qv[d] * kv[d];
            p[j] = s * scale;
            maxs = std::max(maxs, p[j]);
          }
        }
        S denom = S(0);
        for (int r = 0; r < 2; ++r)
          for (long j = keys.begin[r]; j < keys.end[r]; ++j) denom += p[j] = std::exp(p[j] - maxs);
        S dot = S(0);  // Σ_j p_j dp_j
        for (int r = 0; r < 2; ++r) {
          for (long j = keys.begin[r]; j < keys.end[r]; ++j) {
            p[j] /= denom;
            const S* vv = v + (j * G + g) * D;
            S s = S(0);
            for (int d = 0; d < D; ++d) s += dyv[d] * vv[d];
            dp[j] = s;
            dot += p[j] * s;
          }
        }
        if (dlse) dot -= dlse[(long)t * H + h];  // ds_j = p_j (dp_j − Σ p dp + dlse)
        S* dqv = dq + ((long)t * H + h) * D;
        for (int r = 0; r < 2; ++r) {
          for (long j = keys.begin[r]; j < keys.end[r]; ++j) {
            const S ds = p[j] * (dp[j] - dot) * scale;
            const S* kv = k + (j * G + g) * D;
            S* dkv = dk + (j * G + g) * D;
            S* dvv = dv + (j * G + g) * D;
            for (int d = 0; d < D; ++d) {
              dqv[d] += ds * kv[d];
              dkv[d] += ds * qv[d];
              dvv[d] += p[j] * dyv[d];
            }
          }
        }
      }
    }
  }
}

#define GOLINEAR_INSTANTIATE(S)                                                                  \
  template void rope_rotate_generic<S>(S*, const float*, int, int, int, long, int);             \
  template void attention_forward_generic<S>(S*, const S*, const S*, const S*, int, int, long,  \
                                             int, int, int, AttentionMask, S*);                 \
  template void attention_backward_generic<S>(S*, S*, S*, const S*, const S*, const S*,         \
                                              const S*, int, int, int, int, AttentionMask,      \
                                              const S*);
GOLINEAR_INSTANTIATE(float)
GOLINEAR_INSTANTIATE(double)
#undef GOLINEAR_INSTANTIATE

}  // namespace golinear::kernels::cpu
