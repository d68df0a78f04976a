#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/block_gemm.h"
#include "kernels/cpu/fast_exp.h"

namespace golinear::kernels::cpu {

void attention_forward_reference(float* y, const float* q, const float* k, const float* v, int Tq, int Tk,
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

void attention_backward_reference(float* dq, float* dk, float* dv, const float* dy, const float* q,
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

// ---- blocked fp32 forms --------------------------------------------------------------------------

namespace {

constexpr int kQueryBlock = 64;

// The keys a block of queries at positions p0 .. p_last may see, as at most two ranges of key
// positions [begin, end); per query the allowed part of each range is an interval (see
// allowed_interval).
struct KeySpan {
  long begin[2] = {0, 0}, end[2] = {0, 0};
  long width() const { return (end[0] - begin[0]) + (end[1] - begin[1]); }
};

KeySpan key_span(AttentionMask mask, long p0, long p_last, long Tk) {
  KeySpan r;
  const long last = std::min(p_last + 1, Tk);
  if (mask.window < 0) {
    r.end[0] = last;
    return r;
  }
  r.end[0] = std::min<long>(mask.sinks, last);
  r.begin[1] = std::max<long>(mask.sinks, p0 - mask.window + 1);
  r.end[1] = std::max(r.begin[1], last);
  return r;
}

// Within range r of the span, query position t sees keys [lo, hi).
void allowed_interval(AttentionMask mask, const KeySpan& span, int r, long t, long& lo, long& hi) {
  lo = span.begin[r];
  hi = std::min(span.end[r], t + 1);
  if (r == 1 && mask.window >= 0) lo = std::min(std::max(lo, t - mask.window + 1), span.end[r]);
  hi = std::max(lo, hi);
}

// Keys per sgemm call: blocks of ≤ 64·64·64 multiply-adds stay on the calling thread.
int key_block(int D) { return std::max(16, 64 * 64 / std::max(D, 1)); }

// Rows of scores → probabilities in place: row i (query position p0 + i) keeps its allowed
// interval of each range (softmax over them), everything else becomes exactly 0. Compiled for
// x86-64-v3 (AVX2, FMA) too and picked at run time: the exp loop is the hot part. Defined before
// its first use, with no separate declaration: clang 14 miscompiles a multiversioned function
// of internal linkage that is declared first and defined later (the clone it calls receives
// garbage arguments — `span` came in null; a 12-line reproduction gives 0 instead of 11); gcc
// is right either way. Found by the linearization_weights fuzzer (session 10).
__attribute__((target_clones("arch=x86-64-v3", "default")))
void softmax_masked_rows(float* probs, int ldp, int nq, long p0, AttentionMask mask,
                         const KeySpan& span, float* lse, long lse_stride) {
  const int width = (int)span.width();
  for (int i = 0; i < nq; ++i) {
    float* row = probs + (long)i * ldp;
    const long t = p0 + i;
    long lo[2], hi[2];
    int off[2] = {0, (int)(span.end[0] - span.begin[0])};
    float maxs = -INFINITY;
    for (int r = 0; r < 2; ++r) {
      allowed_interval(mask, span, r, t, lo[r], hi[r]);
      const float* seg = row + off[r] - span.begin[r];
#pragma omp simd reduction(max : maxs)
      for (long j = lo[r]; j < hi[r]; ++j) maxs = maxs > seg[j] ? maxs : seg[j];
    }
    float denom = 0.0f;
    for (int r = 0; r < 2; ++r) {
      float* seg = row + off[r];
      const int a = (int)(lo[r] - span.begin[r]), b = (int)(hi[r] - span.begin[r]);
      const int n = (int)(span.end[r] - span.begin[r]);
      for (int c = 0; c < a; ++c) seg[c] = 0.0f;
#pragma omp simd reduction(+ : denom)
      for (int c = a; c < b; ++c) {
        const float e = exp_vectorizable(seg[c] - maxs);
        seg[c] = e;
        denom += e;
      }
      for (int c = b; c < n; ++c) seg[c] = 0.0f;
    }
    const float inv = 1.0f / denom;
    for (int c = 0; c < width; ++c) row[c] *= inv;
    if (lse) lse[(long)i * lse_stride] = maxs + std::log(denom);
  }
}

// Scores of queries q_blk (nq, ·; row stride ldq) against the span's keys (kv head g): probs
// (nq, span.width()) = softmax rows of the masked q kᵀ·scale, exact zeros where masked; lse
// (nq rows of stride lse_stride), when given, the rows' log-sum-exp.
void block_probabilities(float* probs, int ldp, const float* q_blk, int ldq, int nq, long p0,
                         const float* k, int G, int g, int D, float scale, AttentionMask mask,
                         const KeySpan& span, float* lse = nullptr, long lse_stride = 0) {
  const int kb = key_block(D);
  int col = 0;
  for (int r = 0; r < 2; ++r) {
    for (long j0 = span.begin[r]; j0 < span.end[r]; j0 += kb) {
      const int n = (int)std::min<long>(kb, span.end[r] - j0);
      block_gemm(false, true, nq, n, D, scale, q_blk, ldq, k + (j0 * G + g) * D, G * D, 0.0f,
                 probs + col, ldp);
      col += n;
    }
  }
  softmax_masked_rows(probs, ldp, nq, p0, mask, span, lse, lse_stride);
}

// out (nq, D; row stride ldo) = beta·out + probs (nq, width) · v over the span (kv head g), or its
// transpose products for the backward (see callers).
void block_probs_times_values(float* out, int ldo, const float* probs, int ldp, int nq,
                              const float* v, int G, int g, int D, const KeySpan& span) {
  const int kb = key_block(D);
  int col = 0;
  float beta = 0.0f;
  for (int r = 0; r < 2; ++r) {
    for (long j0 = span.begin[r]; j0 < span.end[r]; j0 += kb) {
      const int n = (int)std::min<long>(kb, span.end[r] - j0);
      block_gemm(false, false, nq, D, n, 1.0f, probs + col, ldp, v + (j0 * G + g) * D, G * D,
                 beta, out, ldo);
      beta = 1.0f;
      col += n;
    }
  }
}

}  // namespace

void attention_forward(float* y, const float* q, const float* k, const float* v, int Tq, int Tk,
                       long pos0, int H, int G, int D, AttentionMask mask, float* lse) {
  const int group = H / G;
  const float scale = 1.0f / std::sqrt((float)D);
  const int blocks = (Tq + kQueryBlock - 1) / kQueryBlock;
  const long span_max =
      mask.window < 0 ? Tk : std::min<long>(Tk, (long)mask.sinks + mask.window + kQueryBlock);
  const long work = (long)Tq * H * D * span_max;
#pragma omp parallel if (work >= 1L << 20)
  {
    std::vector<float> probs((long)kQueryBlock * span_max);
    // Later query blocks see more keys (causal): hand them out first.
#pragma omp for schedule(dynamic, 1)
    for (int task = 0; task < blocks * H; ++task) {
      const int b = blocks - 1 - task / H, h = task % H, g = h / group;
      const int t0 = b * kQueryBlock, nq = std::min(kQueryBlock, Tq - t0);
      const long p0 = pos0 + t0;
      const KeySpan span = key_span(mask, p0, p0 + nq - 1, Tk);
      const int ldp = (int)span.width();
      const float* q_blk = q + ((long)t0 * H + h) * D;
      block_probabilities(probs.data(), ldp, q_blk, H * D, nq, p0, k, G, g, D, scale, mask, span,
                          lse ? lse + (long)t0 * H + h : nullptr, H);
      block_probs_times_values(y + ((long)t0 * H + h) * D, H * D, probs.data(), ldp, nq, v, G, g,
                               D, span);
    }
  }
}

void attention_backward(float* dq, float* dk, float* dv, const float* dy, const float* q,
                        const float* k, const float* v, int T, int H, int G, int D,
                        AttentionMask mask, const float* dlse) {
  const int group = H / G;
  const float scale = 1.0f / std::sqrt((float)D);
  const int blocks = (T + kQueryBlock - 1) / kQueryBlock;
  const int kb = key_block(D);
  const long span_max =
      mask.window < 0 ? T : std::min<long>(T, (long)mask.sinks + mask.window + kQueryBlock);
  const long work = (long)T * H * D * span_max;
  // Parallel over kv heads: dk and dv of kv head g are written only by the queries of its group.
#pragma omp parallel for schedule(static) if (work >= 1L << 20)
  for (int g = 0; g < G; ++g) {
    std::vector<float> probs((long)kQueryBlock * span_max), dprobs(probs.size());
    for (int h = g * group; h < (g + 1) * group; ++h) {
      for (int b = 0; b < blocks; ++b) {
        const int t0 = b * kQueryBlock, nq = std::min(kQueryBlock, T - t0);
        const KeySpan span = key_span(mask, t0, t0 + nq - 1, T);
        const int ldp = (int)span.width();
        const long row0 = (long)t0 * H + h;
        const float* q_blk = q + row0 * D;
        const float* dy_blk = dy + row0 * D;
        float* dq_blk = dq + row0 * D;
        block_probabilities(probs.data(), ldp, q_blk, H * D, nq, t0, k, G, g, D, scale, mask, span);
        // dP = dY Vᵀ; dS = P ⊙ (dP − Σ_j P dP + dlse)·scale (masked entries have P = 0).
        int col = 0;
        for (int r = 0; r < 2; ++r) {
          for (long j0 = span.begin[r]; j0 < span.end[r]; j0 += kb) {
            const int n = (int)std::min<long>(kb, span.end[r] - j0);
            block_gemm(false, true, nq, n, D, 1.0f, dy_blk, H * D, v + (j0 * G + g) * D, G * D,
                       0.0f, dprobs.data() + col, ldp);
            col += n;
          }
        }
        for (int i = 0; i < nq; ++i) {
          const float* p = probs.data() + (long)i * ldp;
          float* dp = dprobs.data() + (long)i * ldp;
          float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
          for (int c = 0; c < ldp; ++c) dot += p[c] * dp[c];
          if (dlse) dot -= dlse[(row0 + (long)i * H)];
          for (int c = 0; c < ldp; ++c) dp[c] = p[c] * (dp[c] - dot) * scale;
        }
        // dQ += dS K, dK += dSᵀ Q, dV += Pᵀ dY, key block by key block.
        col = 0;
        for (int r = 0; r < 2; ++r) {
          for (long j0 = span.begin[r]; j0 < span.end[r]; j0 += kb) {
            const int n = (int)std::min<long>(kb, span.end[r] - j0);
            const long kv0 = (j0 * G + g) * D;
            block_gemm(false, false, nq, D, n, 1.0f, dprobs.data() + col, ldp, k + kv0, G * D,
                       1.0f, dq_blk, H * D);
            block_gemm(true, false, n, D, nq, 1.0f, dprobs.data() + col, ldp, q_blk, H * D, 1.0f,
                       dk + kv0, G * D);
            block_gemm(true, false, n, D, nq, 1.0f, probs.data() + col, ldp, dy_blk, H * D, 1.0f,
                       dv + kv0, G * D);
            col += n;
          }
        }
      }
    }
  }
}

}  // namespace golinear::kernels::cpu
