#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace golinear::kernels::cpu {

void attention_forward(float* y, const float* q, const float* k, const float* v, int Tq, int Tk,
                       long pos0, int H, int G, int D, AttentionMask mask) {
  const int group = H / G;
  const float scale = 1.0f / std::sqrt((float)D);
#pragma omp parallel
  {
    std::vector<float> scores(Tk);
#pragma omp for collapse(2) schedule(dynamic, 4)
    for (int t = 0; t < Tq; ++t) {
      for (int h = 0; h < H; ++h) {
        const long tpos = pos0 + t;
        const float* qv = q + ((long)t * H + h) * D;
        const int g = h / group;
        float maxs = -INFINITY;
        for (long j = 0; j <= tpos && j < Tk; ++j) {
          if (!mask.allows(tpos, j)) {
            scores[j] = -INFINITY;
            continue;
          }
          const float* kv = k + ((long)j * G + g) * D;
          float s = 0.0f;
          for (int d = 0; d < D; ++d) s += qv[d] * kv[d];
          scores[j] = s * scale;
          maxs = std::max(maxs, scores[j]);
        }
        float* out = y + ((long)t * H + h) * D;
        std::fill(out, out + D, 0.0f);
        float denom = 0.0f;
        for (long j = 0; j <= tpos && j < Tk; ++j) {
          if (scores[j] == -INFINITY) continue;
          float p = std::exp(scores[j] - maxs);
          denom += p;
          const float* vv = v + ((long)j * G + g) * D;
          for (int d = 0; d < D; ++d) out[d] += p * vv[d];
        }
        const float inv = 1.0f / denom;
        for (int d = 0; d < D; ++d) out[d] *= inv;
      }
    }
  }
}

void attention_backward(float* dq, float* dk, float* dv, const float* dy, const float* q,
                        const float* k, const float* v, int T, int H, int G, int D,
                        AttentionMask mask) {
  const int group = H / G;
  const float scale = 1.0f / std::sqrt((float)D);
  std::vector<float> p(T), dp(T);
  // Serial over heads and queries: dk and dv are shared by the queries of a group.
  for (int h = 0; h < H; ++h) {
    const int g = h / group;
    for (int t = 0; t < T; ++t) {
      const float* qv = q + ((long)t * H + h) * D;
      const float* dyv = dy + ((long)t * H + h) * D;
      float maxs = -INFINITY;
      for (int j = 0; j <= t; ++j) {
        if (!mask.allows(t, j)) continue;
        const float* kv = k + ((long)j * G + g) * D;
        float s = 0.0f;
        for (int d = 0; d < D; ++d) s += qv[d] * kv[d];
        p[j] = s * scale;
        maxs = std::max(maxs, p[j]);
      }
      float denom = 0.0f;
      for (int j = 0; j <= t; ++j) {
        if (!mask.allows(t, j)) continue;
        p[j] = std::exp(p[j] - maxs);
        denom += p[j];
      }
      float dot = 0.0f;  // Σ_j p_j dp_j
      for (int j = 0; j <= t; ++j) {
        if (!mask.allows(t, j)) continue;
        p[j] /= denom;
        const float* vv = v + ((long)j * G + g) * D;
        float s = 0.0f;
        for (int d = 0; d < D; ++d) s += dyv[d] * vv[d];
        dp[j] = s;
        dot += p[j] * s;
      }
      float* dqv = dq + ((long)t * H + h) * D;
      for (int j = 0; j <= t; ++j) {
        if (!mask.allows(t, j)) continue;
        const float ds = p[j] * (dp[j] - dot) * scale;
        const float* kv = k + ((long)j * G + g) * D;
        float* dkv = dk + ((long)j * G + g) * D;
        float* dvv = dv + ((long)j * G + g) * D;
        for (int d = 0; d < D; ++d) {
          dqv[d] += ds * kv[d];
          dkv[d] += ds * qv[d];
          dvv[d] += p[j] * dyv[d];
        }
      }
    }
  }
}

}  // namespace golinear::kernels::cpu
