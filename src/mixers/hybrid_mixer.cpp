// The hybrid frame of DESIGN.md §3 (see hybrid_mixer.h for the math, the parameters and the
// delayed-read shift). Stages, each forward beside its backward:
//   1 short conv         q, k, v → q̃, k̃, ṽ                    (kernels/cpu/short_conv.h)
//   2 exact branch       RoPE, softmax over sinks ∪ window      (kernels/cpu/exact_attention.h)
//   3 linear branch      features q̂, k̂ → state kernel → y_lin  (kernels/cpu/gated_{delta,linear}.h)
//   4 mixing             gate / add / scale
//
// Gradient convention: backward functions accumulate (+=) into every gradient they are given,
// parameters and activations alike.
#include "mixers/hybrid_mixer.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <type_traits>

#include "kernels/cpu/block_gemm.h"
#include "kernels/cpu/exact_attention.h"
#include "kernels/cpu/gated_delta.h"
#include "kernels/cpu/gated_linear.h"
#include "kernels/cpu/linear_state.h"
#include "kernels/cpu/short_conv.h"

namespace golinear::mixers {

namespace cpu = kernels::cpu;

namespace {

constexpr double kUnitNormEps = 1e-6;  // q̂ = q / sqrt(‖q‖² + ε)
constexpr double kDecayNormalizer = 16.0;  // GLA's gate_logit_normalizer

// Sizes that follow from the options and the shape.
struct Dims {
  int C, H, G, D, group;
  int Dk, Dv;      // state key and value widths per head (hedgehog: 2D and D + 1)
  int decay_size;  // decay values per token and head: 1 (gdn), Dk (gla, kgla), 0 (hedgehog)
  int s, w;
  bool has_exact, has_linear;
  MixerKind kind;
};

Dims dims_of(const MixerOptions& o, const AttentionShape& shape) {
  Dims d{};
  d.C = shape.C, d.H = shape.H, d.G = shape.G, d.D = shape.D, d.group = shape.H / shape.G;
  d.kind = o.kind;
  const bool hedgehog = o.kind == MixerKind::hedgehog;
  d.Dk = hedgehog ? 2 * shape.D : shape.D;
  d.Dv = hedgehog ? shape.D + 1 : shape.D;
  d.decay_size = o.kind == MixerKind::gdn ? 1 : (hedgehog || o.kind == MixerKind::none) ? 0 : d.Dk;
  d.s = o.sinks, d.w = o.window;
  d.has_exact = o.sinks + o.window > 0;
  d.has_linear = o.kind != MixerKind::none;
  return d;
}

template <class S>
S sigmoid(S x) {
  return S(1) / (S(1) + std::exp(-x));
}
template <class S>
S softplus(S x) {
  return x > S(20) ? x : std::log1p(std::exp(x));
}
template <class S>
S log_sigmoid(S x) {
  return std::min(x, S(0)) - std::log1p(std::exp(-std::abs(x)));
}
template <class S>
S dot(const S* a, const S* b, int n) {
  S acc = S(0);
  for (int i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

// ---- per-call buffers ----------------------------------------------------------------------------

// The whole-sequence forward and backward allocate a few dozen (T, H, D) buffers per call. Freed
// to glibc, blocks of megabytes go back to the kernel and come back as fresh pages, and at training
// shapes the page faults cost about a quarter of the mixer's time. Buffer<S> keeps freed blocks of
// ≥ 1 MiB on a per-thread list (up to 512 MiB per thread) and hands them out again by exact size:
// the same shapes repeat every call.
class BlockPool {
 public:
  static BlockPool& of_this_thread() {
    thread_local BlockPool pool;
    return pool;
  }
  void* take(size_t bytes) {
    if (bytes >= kMinBytes) {
      for (size_t i = 0; i < free_.size(); ++i) {
        if (free_[i].bytes == bytes) {
          void* p = free_[i].data;
          free_[i] = free_.back();
          free_.pop_back();
          kept_ -= bytes;
          return p;
        }
      }
    }
    return ::operator new(bytes);
  }
  void give(void* p, size_t bytes) {
    if (bytes >= kMinBytes && kept_ + bytes <= kMaxKeptBytes) {
      free_.push_back({p, bytes});
      kept_ += bytes;
      return;
    }
    ::operator delete(p);
  }
  ~BlockPool() {
    for (const Block& b : free_) ::operator delete(b.data);
  }

 private:
  static constexpr size_t kMinBytes = 1 << 20, kMaxKeptBytes = 512ul << 20;
  struct Block {
    void* data;
    size_t bytes;
  };
  std::vector<Block> free_;
  size_t kept_ = 0;
};

template <class T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <class U>
  PoolAllocator(const PoolAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(BlockPool::of_this_thread().take(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { BlockPool::of_this_thread().give(p, n * sizeof(T)); }
  bool operator==(const PoolAllocator&) const { return true; }
};

template <class S>
using Buffer = std::vector<S, PoolAllocator<S>>;

// ---- per-token projections of x: out (T, N) = x wᵀ, x (T, C), w (N, C) --------------------------
// fp64 (gradient checks): plain loops, the reference. fp32: cblas_sgemm on blocks of rows small
// enough to stay on the calling thread (the training loop already runs one layer per core).

template <class S>
void project_rows(S* out, const S* x, const S* w, int T, int C, int N, long ldo = 0, long ldx = 0) {
  ldo = ldo ? ldo : N, ldx = ldx ? ldx : C;  // row strides of out and x
  if constexpr (std::is_same_v<S, float>) {
    const int rows = std::max(1, (int)(cpu::kBlockGemmMaxWork / ((long)C * N)));
    for (int t0 = 0; t0 < T; t0 += rows)
      cpu::block_gemm(false, true, std::min(rows, T - t0), N, C, 1.0f, x + t0 * ldx, (int)ldx, w,
                      C, 0.0f, out + t0 * ldo, (int)ldo);
  } else {
    for (int t = 0; t < T; ++t)
      for (int n = 0; n < N; ++n) out[t * ldo + n] = dot(w + (long)n * C, x + t * ldx, C);
  }
}

// dx (T, C) += dout w, dw (N, C) += doutᵀ x for dout (T, N); row strides as project_rows
// (dx shares x's).
template <class S>
void project_rows_backward(S* dx, S* dw, const S* dout, const S* x, const S* w, int T, int C,
                           int N, long ldo = 0, long ldx = 0) {
  ldo = ldo ? ldo : N, ldx = ldx ? ldx : C;
  if constexpr (std::is_same_v<S, float>) {
    const int rows = std::max(1, (int)(cpu::kBlockGemmMaxWork / ((long)C * N)));
    for (int t0 = 0; t0 < T; t0 += rows) {
      const int n = std::min(rows, T - t0);
      cpu::block_gemm(false, false, n, C, N, 1.0f, dout + t0 * ldo, (int)ldo, w, C, 1.0f,
                      dx + t0 * ldx, (int)ldx);
      cpu::block_gemm(true, false, N, C, n, 1.0f, dout + t0 * ldo, (int)ldo, x + t0 * ldx,
                      (int)ldx, 1.0f, dw, C);
    }
  } else {
    for (int t = 0; t < T; ++t) {
      for (int n = 0; n < N; ++n) {
        const S d = dout[t * ldo + n];
        for (int c = 0; c < C; ++c) {
          dw[(long)n * C + c] += d * x[t * ldx + c];
          dx[t * ldx + c] += d * w[(long)n * C + c];
        }
      }
    }
  }
}

// ---- unit norm: out (rows, D) = in / sqrt(‖in‖² + ε) ------------------------------------------

template <class S>
void unit_rows_forward(S* out, const S* in, long rows, int D) {
  for (long r = 0; r < rows; ++r) {
    const S* a = in + r * D;
    const S inv = S(1) / std::sqrt(dot(a, a, D) + S(kUnitNormEps));
    for (int d = 0; d < D; ++d) out[r * D + d] = a[d] * inv;
  }
}

// din (rows, D) += ∂/∂in of Σ dout·out.
template <class S>
void unit_rows_backward(S* din, const S* dout, const S* in, long rows, int D) {
  for (long r = 0; r < rows; ++r) {
    const S* a = in + r * D;
    const S* da = dout + r * D;
    const S inv = S(1) / std::sqrt(dot(a, a, D) + S(kUnitNormEps));
    const S proj = dot(a, da, D) * inv * inv * inv;
    for (int d = 0; d < D; ++d) din[r * D + d] += inv * da[d] - proj * a[d];
  }
}

// ---- Hedgehog feature map: f (2D) = softmax([W u, −W u]); W (D, D), u (D) ---------------------

template <class S>
void feature_map_forward(S* f, const S* W, const S* u, int D) {
  S peak = S(0);
  for (int d = 0; d < D; ++d) {
    f[d] = dot(W + (long)d * D, u, D);
    peak = std::max(peak, std::abs(f[d]));
  }
  S total = S(0);
  for (int d = 0; d < D; ++d) {
    const S a = f[d];
    total += f[d] = std::exp(a - peak);
    total += f[D + d] = std::exp(-a - peak);
  }
  for (int i = 0; i < 2 * D; ++i) f[i] /= total;
}

// du (D) += ∂/∂u, dW (D, D) += ∂/∂W of Σ df·f, given the forward's f.
template <class S>
void feature_map_backward(S* du, S* dW, const S* df, const S* f, const S* W, const S* u, int D) {
  const S mean = dot(f, df, 2 * D);
  for (int d = 0; d < D; ++d) {
    const S da = f[d] * (df[d] - mean) - f[D + d] * (df[D + d] - mean);  // ∂/∂(W u)_d
    const S* Wd = W + (long)d * D;
    S* dWd = dW + (long)d * D;
    for (int e = 0; e < D; ++e) {
      dWd[e] += da * u[e];
      du[e] += da * Wd[e];
    }
  }
}

// ---- stage 3a: linear-branch features ---------------------------------------------------------

// What the linear branch computes from T rows before the state kernel.
template <class S>
struct LinearFeatures {
  Buffer<S> ql, kl;      // (T, H, D), (T, G, D): q̃, k̃ (RoPE'd when linear_rope)
  Buffer<S> qn, kn;      // (T, H, D), (T, G, D): q̂, k̂
  Buffer<S> qf, kf, vf;  // (T, H, Dk), (T, H, Dk), (T, H, Dv): state inputs per query head
  Buffer<S> g;           // (T, H, decay_size) log decay
  Buffer<S> beta;        // (T, H) gdn
  Buffer<S> pre;         // (T, H, decay_size) pre-activation: gdn softplus input, gla/kgla logit
  Buffer<S> hidden;      // (T, kDecayRank) gla: W_down x
};

// x (T, C); qc (T, H, D); kc, vc (T, G, D); rows at positions pos0 .. pos0+T−1.
template <class S>
void linear_features_forward(const Dims& dm, const MixerOptions& o, const HybridTensors<const S*>& p,
                             const S* x, const S* qc, const S* kc, const S* vc, int T, long pos0,
                             const float* inv_freq, LinearFeatures<S>& f) {
  // Named copies, not a structured binding: clang < 16 cannot use bindings in OpenMP regions.
  [[maybe_unused]] const int C = dm.C, H = dm.H, G = dm.G, D = dm.D, group = dm.group, Dk = dm.Dk,
                             Dv = dm.Dv, nd = dm.decay_size, s = dm.s, w = dm.w;
  [[maybe_unused]] const bool has_exact = dm.has_exact, has_linear = dm.has_linear;
  [[maybe_unused]] const MixerKind kind = dm.kind;
  const long nq = (long)T * H * D, nk = (long)T * G * D;
  f.ql.assign(qc, qc + nq);
  f.kl.assign(kc, kc + nk);
  if (o.linear_rope) {
    cpu::rope_rotate_generic(f.ql.data(), inv_freq, T, H, D, pos0, 1);
    cpu::rope_rotate_generic(f.kl.data(), inv_freq, T, G, D, pos0, 1);
  }
  f.qn.resize(nq);
  f.kn.resize(nk);
  unit_rows_forward(f.qn.data(), f.ql.data(), (long)T * H, D);
  unit_rows_forward(f.kn.data(), f.kl.data(), (long)T * G, D);

  f.qf.resize((long)T * H * Dk);
  f.kf.resize((long)T * H * Dk);
  f.vf.resize((long)T * H * Dv);
#pragma omp parallel for collapse(2) schedule(static) if ((long)T * H * D * D >= cpu::kParallelMinWork)
  for (int t = 0; t < T; ++t) {
    for (int h = 0; h < H; ++h) {
      const long row = (long)t * H + h, kv_row = (long)t * G + h / group;
      const S* qn = f.qn.data() + row * D;
      const S* kn = f.kn.data() + kv_row * D;
      const S* v = vc + kv_row * D;
      S* qf = f.qf.data() + row * Dk;
      S* kf = f.kf.data() + row * Dk;
      S* vf = f.vf.data() + row * Dv;
      if (kind == MixerKind::hedgehog) {
        feature_map_forward(qf, p.w_feature_q + (long)h * D * D, qn, D);
        feature_map_forward(kf, p.w_feature_k + (long)h * D * D, kn, D);
        std::copy_n(v, D, vf);
        vf[D] = S(1);  // the normalizer z rides along as an extra value column
      } else {
        std::copy_n(qn, D, qf);
        std::copy_n(kn, D, kf);
        std::copy_n(v, D, vf);
      }
    }
  }

  f.g.resize((long)T * H * nd);
  f.pre.resize((long)T * H * nd);
  if (kind == MixerKind::gdn) {
    f.beta.resize((long)T * H);
    project_rows(f.pre.data(), x, p.w_a, T, C, H);
    project_rows(f.beta.data(), x, p.w_b, T, C, H);
    for (int t = 0; t < T; ++t) {
      for (int h = 0; h < H; ++h) {
        const long row = (long)t * H + h;
        const S u = f.pre[row] += p.dt_bias[h];
        f.g[row] = -std::exp(p.A_log[h]) * softplus(u);
        f.beta[row] = sigmoid(f.beta[row] + p.b_beta[h]);
      }
    }
  } else if (kind == MixerKind::gla) {
    f.hidden.resize((long)T * kDecayRank);
    for (int t = 0; t < T; ++t) {
      const S* xt = x + (long)t * C;
      S* hid = f.hidden.data() + (long)t * kDecayRank;
      for (int r = 0; r < kDecayRank; ++r) hid[r] = dot(p.w_decay_down + (long)r * C, xt, C);
      for (int i = 0; i < H * D; ++i) {
        const long at = (long)t * H * D + i;
        f.pre[at] = dot(p.w_decay_up + (long)i * kDecayRank, hid, kDecayRank) + p.b_decay[i];
        f.g[at] = log_sigmoid(f.pre[at]) / S(kDecayNormalizer);
      }
    }
  } else if (kind == MixerKind::kgla) {
    // pre (T, H, D): head h's rows are k̂ of its kv head times W_key_decay,hᵀ.
    for (int h = 0; h < H; ++h)
      project_rows(f.pre.data() + (long)h * D, f.kn.data() + (long)(h / group) * D,
                   p.w_key_decay + (long)h * D * D, T, D, D, (long)H * D, (long)G * D);
#pragma omp parallel for collapse(2) schedule(static) if ((long)T * H * D * D >= cpu::kParallelMinWork)
    for (int t = 0; t < T; ++t) {
      for (int h = 0; h < H; ++h) {
        for (int d = 0; d < D; ++d) {
          const long at = ((long)t * H + h) * D + d;
          f.pre[at] += p.b_key_decay[h * D + d];
          f.g[at] = log_sigmoid(f.pre[at]) / S(kDecayNormalizer);
        }
      }
    }
  }
}

// Backward of linear_features_forward given the gradients of its outputs: dqf, dkf (T, H, Dk),
// dvf (T, H, Dv), dg (T, H, decay_size), dbeta (T, H). Accumulates into dx (T, C), dqc (T, H, D),
// dkc, dvc (T, G, D) and the parameter gradients.
template <class S>
void linear_features_backward(const Dims& dm, const MixerOptions& o,
                              const HybridTensors<const S*>& p, const HybridTensors<S*>& dp,
                              const S* x, int T, long pos0, const float* inv_freq,
                              const LinearFeatures<S>& f, const S* dqf, const S* dkf, const S* dvf,
                              const S* dg, const S* dbeta, S* dx, S* dqc, S* dkc, S* dvc) {
  // Named copies, not a structured binding: clang < 16 cannot use bindings in OpenMP regions.
  [[maybe_unused]] const int C = dm.C, H = dm.H, G = dm.G, D = dm.D, group = dm.group, Dk = dm.Dk,
                             Dv = dm.Dv, nd = dm.decay_size, s = dm.s, w = dm.w;
  [[maybe_unused]] const bool has_exact = dm.has_exact, has_linear = dm.has_linear;
  [[maybe_unused]] const MixerKind kind = dm.kind;
  Buffer<S> dqn((long)T * H * D, S(0)), dkn((long)T * G * D, S(0));
  Buffer<S> dpre_key(kind == MixerKind::kgla ? (long)T * H * D : 0);  // (T, H, D)

  // Decay and β of gdn and gla (they read x).
  if (kind == MixerKind::gdn) {
    Buffer<S> du((long)T * H), dz((long)T * H);  // gradients of w_a·x + dt_bias, w_b·x + b_beta
    for (int t = 0; t < T; ++t) {
      for (int h = 0; h < H; ++h) {
        const long row = (long)t * H + h;
        // g = −exp(A_log)·softplus(u): ∂g/∂A_log = g, ∂g/∂u = −exp(A_log)·σ(u).
        dp.A_log[h] += dg[row] * f.g[row];
        du[row] = dg[row] * -std::exp(p.A_log[h]) * sigmoid(f.pre[row]);
        dp.dt_bias[h] += du[row];
        const S beta = f.beta[row];
        dz[row] = dbeta[row] * beta * (S(1) - beta);
        dp.b_beta[h] += dz[row];
      }
    }
    project_rows_backward(dx, dp.w_a, du.data(), x, p.w_a, T, C, H);
    project_rows_backward(dx, dp.w_b, dz.data(), x, p.w_b, T, C, H);
  } else if (kind == MixerKind::gla) {
    Buffer<S> dhid(kDecayRank);
    for (int t = 0; t < T; ++t) {
      const S* xt = x + (long)t * C;
      const S* hid = f.hidden.data() + (long)t * kDecayRank;
      std::fill(dhid.begin(), dhid.end(), S(0));
      for (int i = 0; i < H * D; ++i) {
        const long at = (long)t * H * D + i;
        // g = logsigmoid(pre)/16: ∂g/∂pre = σ(−pre)/16.
        const S dpre = dg[at] * sigmoid(-f.pre[at]) / S(kDecayNormalizer);
        dp.b_decay[i] += dpre;
        const S* wup = p.w_decay_up + (long)i * kDecayRank;
        S* dwup = dp.w_decay_up + (long)i * kDecayRank;
        for (int r = 0; r < kDecayRank; ++r) {
          dwup[r] += dpre * hid[r];
          dhid[r] += dpre * wup[r];
        }
      }
      S* dxt = dx + (long)t * C;
      for (int r = 0; r < kDecayRank; ++r) {
        const S* wdown = p.w_decay_down + (long)r * C;
        S* dwdown = dp.w_decay_down + (long)r * C;
        for (int c = 0; c < C; ++c) {
          dwdown[c] += dhid[r] * xt[c];
          dxt[c] += dhid[r] * wdown[c];
        }
      }
    }
  }

  // Features per query head. Parallel over kv heads: the query heads of group g write only their
  // own per-head parameter gradients and the rows of kv head g.
#pragma omp parallel for schedule(static) if ((long)T * H * D * D >= cpu::kParallelMinWork)
  for (int g = 0; g < G; ++g) {
    for (int h = g * group; h < (g + 1) * group; ++h) {
      for (int t = 0; t < T; ++t) {
        const long row = (long)t * H + h, kv_row = (long)t * G + g;
        const S* qn = f.qn.data() + row * D;
        const S* kn = f.kn.data() + kv_row * D;
        S* dqn_row = dqn.data() + row * D;
        S* dkn_row = dkn.data() + kv_row * D;
        if (kind == MixerKind::hedgehog) {
          const long wo = (long)h * D * D;
          feature_map_backward(dqn_row, dp.w_feature_q + wo, dqf + row * Dk,
                               f.qf.data() + row * Dk, p.w_feature_q + wo, qn, D);
          feature_map_backward(dkn_row, dp.w_feature_k + wo, dkf + row * Dk,
                               f.kf.data() + row * Dk, p.w_feature_k + wo, kn, D);
        } else {
          for (int d = 0; d < D; ++d) {
            dqn_row[d] += dqf[row * Dk + d];
            dkn_row[d] += dkf[row * Dk + d];
          }
        }
        for (int d = 0; d < D; ++d) dvc[kv_row * D + d] += dvf[row * Dv + d];
        if (kind == MixerKind::kgla) {
          for (int d = 0; d < D; ++d) {
            const long at = row * D + d;
            const S dpre = dg[at] * sigmoid(-f.pre[at]) / S(kDecayNormalizer);
            dp.b_key_decay[h * D + d] += dpre;
            dpre_key[at] = dpre;
          }
        }
      }
      if (kind == MixerKind::kgla)  // through pre = k̂ W_key_decay,hᵀ
        project_rows_backward(dkn.data() + (long)g * D, dp.w_key_decay + (long)h * D * D,
                              dpre_key.data() + (long)h * D, f.kn.data() + (long)g * D,
                              p.w_key_decay + (long)h * D * D, T, D, D, (long)H * D, (long)G * D);
    }
  }

  // Unit norm, then the optional RoPE.
  Buffer<S> dql((long)T * H * D, S(0)), dkl((long)T * G * D, S(0));
  unit_rows_backward(dql.data(), dqn.data(), f.ql.data(), (long)T * H, D);
  unit_rows_backward(dkl.data(), dkn.data(), f.kl.data(), (long)T * G, D);
  if (o.linear_rope) {
    cpu::rope_rotate_generic(dql.data(), inv_freq, T, H, D, pos0, -1);
    cpu::rope_rotate_generic(dkl.data(), inv_freq, T, G, D, pos0, -1);
  }
  for (size_t i = 0; i < dql.size(); ++i) dqc[i] += dql[i];
  for (size_t i = 0; i < dkl.size(); ++i) dkc[i] += dkl[i];
}

// ---- stage 3b: the state over the whole sequence, with the delayed read -----------------------

// Rows where the kernels start: keys (and values, decays) at row s, queries at row s + w;
// N = T − s − w kernel steps (none when T ≤ s + w: every y_lin is then 0).
struct StateShift {
  int key_row, query_row, N;
};
StateShift state_shift(const Dims& dm, int T) {
  return {dm.s, dm.s + dm.w, std::max(0, T - dm.s - dm.w)};
}

// o (T, H, Dv) = q-features read against the delayed state; rows t < s + w stay 0.
// state_final (H, Dk, Dv) or null receives the state of tokens s .. T−w−1 (what a decode cache
// holds after T tokens); it is left untouched when no token has left the window.
template <class S>
void state_forward(const Dims& dm, const LinearFeatures<S>& f, int T, StateForm form, S* o,
                   S* state_final = nullptr) {
  const int H = dm.H, Dk = dm.Dk, Dv = dm.Dv, nd = dm.decay_size;
  const StateShift sh = state_shift(dm, T);
  std::fill(o, o + (long)T * H * Dv, S(0));
  if (sh.N == 0) return;
  const long kr = (long)sh.key_row * H, qr = (long)sh.query_row * H;
  const S* q = f.qf.data() + qr * Dk;
  const S* k = f.kf.data() + kr * Dk;
  const S* v = f.vf.data() + kr * Dv;
  S* out = o + qr * Dv;
  if (dm.kind == MixerKind::gdn) {
    const S* g = f.g.data() + kr;
    const S* beta = f.beta.data() + kr;
    if (form == StateForm::chunked && std::is_same_v<S, float>)  // the fast fp32 form
      cpu::gated_delta_blocked_forward((float*)out, (float*)state_final, nullptr, (const float*)q,
                                       (const float*)k, (const float*)v, (const float*)g,
                                       (const float*)beta, sh.N, H, Dk, Dv);
    else if (form == StateForm::chunked)  // fp64: the reference, for gradient checks
      cpu::gated_delta_chunked_forward<S>(out, state_final, nullptr, q, k, v, g, beta, sh.N, H,
                                          Dk, Dv);
    else
      cpu::gated_delta_recurrent_forward<S>(out, state_final, nullptr, q, k, v, g, beta, sh.N, H,
                                            Dk, Dv);
  } else {
    const S* g = nd > 0 ? f.g.data() + kr * nd : nullptr;
    if (form == StateForm::chunked && std::is_same_v<S, float>)  // the fast fp32 form
      cpu::gated_linear_blocked_forward((float*)out, (float*)state_final, nullptr, (const float*)q,
                                        (const float*)k, (const float*)v, (const float*)g, sh.N,
                                        H, Dk, Dv);
    else if (form == StateForm::chunked)  // fp64: the reference
      cpu::gated_linear_chunked_forward<S>(out, state_final, nullptr, q, k, v, g, sh.N, H, Dk, Dv);
    else
      cpu::gated_linear_recurrent_forward<S>(out, state_final, nullptr, q, k, v, g, sh.N, H, Dk,
                                             Dv);
  }
}

// Gradients (+=) into dqf, dkf (T, H, Dk), dvf (T, H, Dv), dg (T, H, decay_size), dbeta (T, H)
// from dout (T, H, Dv).
template <class S>
void state_backward(const Dims& dm, const LinearFeatures<S>& f, int T, const S* dout, S* dqf,
                    S* dkf, S* dvf, S* dg, S* dbeta) {
  const int H = dm.H, Dk = dm.Dk, Dv = dm.Dv, nd = dm.decay_size;
  const StateShift sh = state_shift(dm, T);
  if (sh.N == 0) return;
  const long kr = (long)sh.key_row * H, qr = (long)sh.query_row * H;
  const S* q = f.qf.data() + qr * Dk;
  const S* k = f.kf.data() + kr * Dk;
  const S* v = f.vf.data() + kr * Dv;
  if (dm.kind == MixerKind::gdn) {
    if constexpr (std::is_same_v<S, float>)  // the fast form, checked against the reference
      cpu::gated_delta_blocked_backward(dqf + qr * Dk, dkf + kr * Dk, dvf + kr * Dv, dg + kr,
                                        dbeta + kr, dout + qr * Dv, q, k, v, f.g.data() + kr,
                                        f.beta.data() + kr, sh.N, H, Dk, Dv);
    else  // fp64: the token-by-token reference, for gradient checks
      cpu::gated_delta_backward<S>(dqf + qr * Dk, dkf + kr * Dk, dvf + kr * Dv, dg + kr,
                                   dbeta + kr, dout + qr * Dv, q, k, v, f.g.data() + kr,
                                   f.beta.data() + kr, sh.N, H, Dk, Dv);
  } else {
    const S* g = nd > 0 ? f.g.data() + kr * nd : nullptr;
    cpu::gated_linear_backward<S>(dqf + qr * Dk, dkf + kr * Dk, dvf + kr * Dv,
                                  nd > 0 ? dg + kr * nd : nullptr, dout + qr * Dv, q, k, v, g,
                                  sh.N, H, Dk, Dv);
  }
}

// y_lin (T, H, D) from the state read o (T, H, Dv): o itself, or for hedgehog the numerator over
// the normalizer column (0 while the state is empty, where both are 0).
template <class S>
void linear_output_forward(const Dims& dm, const S* o, int T, S* y_lin) {
  const int D = dm.D, Dv = dm.Dv;
  for (long row = 0; row < (long)T * dm.H; ++row) {
    const S* orow = o + row * Dv;
    const S scale = dm.kind != MixerKind::hedgehog ? S(1) : orow[D] > S(0) ? S(1) / orow[D] : S(0);
    for (int d = 0; d < D; ++d) y_lin[row * D + d] = orow[d] * scale;
  }
}

// dout (T, H, Dv) += ∂/∂o of Σ dy_lin·y_lin.
template <class S>
void linear_output_backward(const Dims& dm, const S* o, const S* dy_lin, int T, S* dout) {
  const int D = dm.D, Dv = dm.Dv;
  for (long row = 0; row < (long)T * dm.H; ++row) {
    const S* orow = o + row * Dv;
    const S* dyrow = dy_lin + row * D;
    S* drow = dout + row * Dv;
    if (dm.kind != MixerKind::hedgehog) {
      for (int d = 0; d < D; ++d) drow[d] += dyrow[d];
    } else if (orow[D] > S(0)) {
      const S inv = S(1) / orow[D];
      for (int d = 0; d < D; ++d) drow[d] += dyrow[d] * inv;
      drow[D] -= dot(dyrow, orow, D) * inv * inv;
    }
  }
}

// ---- stage 4: mixing ---------------------------------------------------------------------------

bool is_gate(MixKind mix) {
  return mix == MixKind::gate || mix == MixKind::gate_lse || mix == MixKind::split;
}

// Whether the mix reads the exact branch's log-sum-exp (gate-lse, split; both branches there).
bool uses_lse(const Dims& dm, const MixerOptions& o) {
  return dm.has_exact && dm.has_linear && (o.mix == MixKind::gate_lse || o.mix == MixKind::split);
}

// Mix split: the number of tokens in the linear state at position t, n_far(t) = t − s − w + 1
// (those s ≤ j ≤ t − w); ≤ 0 means none has left the exact set and λ = 0.
long far_count(const Dims& dm, long t) { return t - dm.s - dm.w + 1; }

// y (T, H, D) from y_exact, y_lin (T, H, D) (either may be unused), x (T, C), lse (T, H) (mix
// gate-lse, split); lambda (T, H) receives the gate of the gate mixes. Row t is position t0 + t.
template <class S>
void mix_forward(const Dims& dm, const MixerOptions& o, const HybridTensors<const S*>& p,
                 const S* x, const S* y_exact, const S* y_lin, const S* lse, int T, long t0,
                 S* lambda, S* y) {
  const int C = dm.C, H = dm.H, D = dm.D;
  const bool gated = dm.has_exact && dm.has_linear && is_gate(o.mix);
  const bool with_lse = uses_lse(dm, o);
  if (gated) project_rows(lambda, x, p.w_lambda, T, C, H);  // the gate's logits, (T, H)
  for (int t = 0; t < T; ++t) {
    for (int h = 0; h < H; ++h) {
      const long row = (long)t * H + h;
      S* out = y + row * D;
      const S* ye = dm.has_exact ? y_exact + row * D : nullptr;
      const S* yl = dm.has_linear ? y_lin + row * D : nullptr;
      if (!ye || !yl) {
        std::copy_n(ye ? ye : yl, D, out);
        continue;
      }
      S a = S(1), b = S(1);  // y = a·y_exact + b·y_lin
      if (gated) {
        S z = lambda[row] + p.b_lambda[h];
        if (with_lse) z -= p.c_lse[h] * lse[row];
        const long n_far = o.mix == MixKind::split ? far_count(dm, t0 + t) : 1;
        if (o.mix == MixKind::split && n_far > 0) z += p.a_far[h] * std::log(S(n_far));
        const S l = n_far > 0 ? sigmoid(z) : S(0);
        lambda[row] = l;
        a = S(1) - l, b = l;
      } else if (o.mix == MixKind::scale) {
        b = p.gamma[h];
      }
      for (int d = 0; d < D; ++d) out[d] = a * ye[d] + b * yl[d];
    }
  }
}

// dy_exact, dy_lin (T, H, D), dx (T, C), dlse (T, H) (mix gate-lse, split) and the mixing
// parameters (+=). λ = 0 rows of split (no far token) pass no gradient to the gate: σ' = 0 there.
template <class S>
void mix_backward(const Dims& dm, const MixerOptions& o, const HybridTensors<const S*>& p,
                  const HybridTensors<S*>& dp, const S* x, const S* y_exact, const S* y_lin,
                  const S* lse, const S* lambda, const S* dy, int T, S* dy_exact, S* dy_lin,
                  S* dx, S* dlse) {
  const int C = dm.C, H = dm.H, D = dm.D;
  const bool gated = dm.has_exact && dm.has_linear && is_gate(o.mix);
  const bool with_lse = uses_lse(dm, o);
  Buffer<S> dlogit(gated ? (long)T * H : 0);  // gradient of the gate's logits, (T, H)
  for (int t = 0; t < T; ++t) {
    for (int h = 0; h < H; ++h) {
      const long row = (long)t * H + h;
      const S* dyr = dy + row * D;
      if (!dm.has_exact || !dm.has_linear) {
        S* target = dm.has_exact ? dy_exact + row * D : dy_lin + row * D;
        for (int d = 0; d < D; ++d) target[d] += dyr[d];
        continue;
      }
      const S* ye = y_exact + row * D;
      const S* yl = y_lin + row * D;
      S a = S(1), b = S(1);
      if (gated) {
        const S l = lambda[row];
        a = S(1) - l, b = l;
        S dl = S(0);
        for (int d = 0; d < D; ++d) dl += dyr[d] * (yl[d] - ye[d]);
        const S dz = dl * l * (S(1) - l);
        dp.b_lambda[h] += dz;
        dlogit[row] = dz;
        if (with_lse) {  // z = … − c_h·lse
          dp.c_lse[h] -= dz * lse[row];
          dlse[row] -= dz * p.c_lse[h];
        }
        if (o.mix == MixKind::split && far_count(dm, t) > 0)  // z = … + a_h·log n_far (t0 = 0)
          dp.a_far[h] += dz * std::log(S(far_count(dm, t)));
      } else if (o.mix == MixKind::scale) {
        b = p.gamma[h];
        dp.gamma[h] += dot(dyr, yl, D);
      }
      for (int d = 0; d < D; ++d) {
        dy_exact[row * D + d] += a * dyr[d];
        dy_lin[row * D + d] += b * dyr[d];
      }
    }
  }
  if (gated) project_rows_backward(dx, dp.w_lambda, dlogit.data(), x, p.w_lambda, T, C, H);
}

// ---- the whole sequence --------------------------------------------------------------------------

template <class S>
struct HybridActivations {
  Buffer<S> qc, kc, vc;  // (T, H, D), (T, G, D), (T, G, D) after the short conv
  Buffer<S> qr, kr;      // RoPE'd qc, kc for the exact branch
  Buffer<S> y_exact;     // (T, H, D)
  LinearFeatures<S> features;
  Buffer<S> o;           // (T, H, Dv) state read
  Buffer<S> y_lin;       // (T, H, D)
  Buffer<S> lambda;      // (T, H) mix gate
  Buffer<S> lse;         // (T, H) exact branch's log-sum-exp (mix gate-lse)
};

// The whole sequence, keeping every activation in `a`; state_final as in state_forward.
template <class S>
void hybrid_run_forward(const Dims& dm, const MixerOptions& o, const HybridTensors<const S*>& p,
                        const HybridInputs<S>& in, StateForm form, HybridActivations<S>& a, S* y,
                        S* state_final = nullptr) {
  const int T = in.T, H = dm.H, G = dm.G, D = dm.D;
  const long nq = (long)T * H * D, nk = (long)T * G * D;
  a.qc.resize(nq), a.kc.resize(nk), a.vc.resize(nk);
  if (o.conv) {
    cpu::short_conv_forward(a.qc.data(), in.q, p.conv_q, T, H * D);
    cpu::short_conv_forward(a.kc.data(), in.k, p.conv_k, T, G * D);
    cpu::short_conv_forward(a.vc.data(), in.v, p.conv_v, T, G * D);
  } else {
    std::copy_n(in.q, nq, a.qc.begin());
    std::copy_n(in.k, nk, a.kc.begin());
    std::copy_n(in.v, nk, a.vc.begin());
  }
  if (dm.has_exact) {
    a.qr = a.qc, a.kr = a.kc;
    cpu::rope_rotate_generic(a.qr.data(), in.inv_freq, T, H, D, 0, 1);
    cpu::rope_rotate_generic(a.kr.data(), in.inv_freq, T, G, D, 0, 1);
    a.y_exact.resize(nq);
    a.lse.resize(uses_lse(dm, o) ? (long)T * H : 0);
    S* lse = uses_lse(dm, o) ? a.lse.data() : nullptr;
    if constexpr (std::is_same_v<S, float>)  // the blocked fp32 kernel
      cpu::attention_forward(a.y_exact.data(), a.qr.data(), a.kr.data(), a.vc.data(), T, T, 0, H,
                             G, D, cpu::AttentionMask{dm.s, dm.w}, lse);
    else  // fp64: the reference, for gradient checks
      cpu::attention_forward_generic(a.y_exact.data(), a.qr.data(), a.kr.data(), a.vc.data(), T,
                                     T, 0, H, G, D, cpu::AttentionMask{dm.s, dm.w}, lse);
  }
  if (dm.has_linear) {
    linear_features_forward(dm, o, p, in.x, a.qc.data(), a.kc.data(), a.vc.data(), T, 0,
                            in.inv_freq, a.features);
    a.o.resize((long)T * H * dm.Dv);
    state_forward(dm, a.features, T, form, a.o.data(), state_final);
    a.y_lin.resize(nq);
    linear_output_forward(dm, a.o.data(), T, a.y_lin.data());
  }
  a.lambda.assign((long)T * H, S(0));
  mix_forward(dm, o, p, in.x, a.y_exact.data(), a.y_lin.data(), a.lse.data(), T, 0,
              a.lambda.data(), y);
}

// Adds src (n) into dst when dst is given.
template <class S>
void accumulate(S* dst, const Buffer<S>& src) {
  if (dst)
    for (size_t i = 0; i < src.size(); ++i) dst[i] += src[i];
}

// Box–Muller normals and uniforms from std::mt19937_64: the same numbers on every platform.
class InitRandom {
 public:
  explicit InitRandom(uint64_t seed) : engine_(seed) {}
  double uniform() { return ((engine_() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  double normal() {
    const double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  std::mt19937_64 engine_;
};

constexpr double kInitStd = 0.02;

// Initial values of one tensor (see hybrid_mixer.h).
std::vector<float> initial_values(const TensorSpec& spec, int D, InitRandom& random) {
  long n = 1;
  for (int64_t e : spec.shape) n *= e;
  std::vector<float> v(n, 0.0f);
  const std::string& name = spec.name;
  if (name.rfind("conv_", 0) == 0) {
    for (long c = 0; c < n / cpu::kShortConvWidth; ++c) v[c * cpu::kShortConvWidth + 3] = 1.0f;
  } else if (name == "b_lambda") {
    std::fill(v.begin(), v.end(), -2.0f);
  } else if (name == "A_log") {
    for (float& a : v) a = (float)std::log(random.uniform(1.0, 16.0));
  } else if (name == "dt_bias") {
    for (float& b : v) {
      const double dt = std::max(1e-4, std::exp(random.uniform(std::log(1e-3), std::log(1e-1))));
      b = (float)(dt + std::log(-std::expm1(-dt)));
    }
  } else if (name == "w_a" || name == "w_b" || name == "w_decay_down" || name == "w_decay_up" ||
             name == "w_key_decay") {
    for (float& w : v) w = (float)(kInitStd * random.normal());
  } else if (name == "w_feature_q" || name == "w_feature_k") {
    for (long h = 0; h < n / ((long)D * D); ++h)
      for (int d = 0; d < D; ++d) v[(h * D + d) * D + d] = 1.0f;
  }
  // w_lambda, gamma, c_lse, a_far, b_beta, b_decay, b_key_decay: 0.
  return v;
}

// ---- decode cache --------------------------------------------------------------------------------

class HybridCache final : public MixerCache {
 public:
  size_t bytes() const override {
    size_t n = 0;
    for (const auto* v : {&conv_q, &conv_k, &conv_v, &sink_k, &sink_v, &ring_k, &ring_v, &ring_kf,
                          &ring_vf, &ring_g, &ring_beta, &state, &gather_k, &gather_v})
      n += v->capacity();
    return n * sizeof(float);
  }
  // Every member is a value (no pointers into other members): a member-wise copy is deep.
  std::unique_ptr<MixerCache> clone() const override {
    auto c = std::make_unique<HybridCache>();
    c->position = position;
    using Member = std::vector<float> HybridCache::*;
    for (Member m : {&HybridCache::conv_q, &HybridCache::conv_k, &HybridCache::conv_v,
                     &HybridCache::sink_k, &HybridCache::sink_v, &HybridCache::ring_k,
                     &HybridCache::ring_v, &HybridCache::ring_kf, &HybridCache::ring_vf,
                     &HybridCache::ring_g, &HybridCache::ring_beta, &HybridCache::state,
                     &HybridCache::gather_k, &HybridCache::gather_v})
      (*c).*m = copy_with_capacity(this->*m);
    return c;
  }
  std::vector<float> conv_q, conv_k, conv_v;  // (3, H·D), (3, G·D), (3, G·D): last raw inputs
  std::vector<float> sink_k, sink_v;          // (s, G, D): RoPE'd k̃, ṽ of the sinks
  std::vector<float> ring_k, ring_v;          // (w, G, D): RoPE'd k̃, ṽ of the window
  std::vector<float> ring_kf, ring_vf;        // (w, H, Dk), (w, H, Dv): state entries of the window
  std::vector<float> ring_g, ring_beta;       // (w, H, decay_size), (w, H)
  std::vector<float> state;                   // (H, Dk, Dv)
  std::vector<float> gather_k, gather_v;      // (s + w, G, D): scratch, exact keys of one query
};

// One convolved row: out (N) from the 3 previous raw rows in history (3, N) and the current raw
// row x (N); history shifts by one.
void conv_step(float* out, std::vector<float>& history, const float* x, const float* w, int N) {
  const int K = cpu::kShortConvWidth;
  std::vector<float> rows((long)K * N), conv((long)K * N);
  std::copy(history.begin(), history.end(), rows.begin());
  std::copy_n(x, N, rows.begin() + (long)(K - 1) * N);
  cpu::short_conv_forward(conv.data(), rows.data(), w, K, N);
  std::copy_n(conv.data() + (long)(K - 1) * N, N, out);
  std::copy(rows.begin() + N, rows.end(), history.begin());
}

// Pushes one token's state entry into every head's state: kf (H, Dk), vf (H, Dv),
// g (H, decay_size), beta (H).
void state_push(const Dims& dm, std::vector<float>& state, const float* kf, const float* vf,
                const float* g, const float* beta) {
  const long state_size = (long)dm.Dk * dm.Dv;
  std::vector<float> scratch(dm.Dv);
  for (int h = 0; h < dm.H; ++h) {
    float* S = state.data() + h * state_size;
    const float* k = kf + (long)h * dm.Dk;
    const float* v = vf + (long)h * dm.Dv;
    if (dm.kind == MixerKind::gdn)
      cpu::gated_delta_state_update(S, k, v, g[h], beta[h], dm.Dk, dm.Dv, scratch.data());
    else
      cpu::gated_linear_state_update(S, k, v, dm.decay_size ? g + (long)h * dm.decay_size : nullptr,
                                     dm.Dk, dm.Dv);
  }
}

}  // namespace

// ---- public entry points -------------------------------------------------------------------------

std::vector<TensorSpec> hybrid_tensor_specs(const MixerOptions& o, const AttentionShape& shape) {
  const int64_t C = shape.C, H = shape.H, G = shape.G, D = shape.D;
  const Dims dm = dims_of(o, shape);
  std::vector<TensorSpec> specs;
  if (o.conv) {
    specs.push_back({"conv_q", {H * D, cpu::kShortConvWidth}});
    specs.push_back({"conv_k", {G * D, cpu::kShortConvWidth}});
    specs.push_back({"conv_v", {G * D, cpu::kShortConvWidth}});
  }
  if (dm.has_exact && dm.has_linear) {
    if (is_gate(o.mix)) {
      specs.push_back({"w_lambda", {H, C}});
      specs.push_back({"b_lambda", {H}});
      if (o.mix == MixKind::gate_lse || o.mix == MixKind::split) specs.push_back({"c_lse", {H}});
      if (o.mix == MixKind::split) specs.push_back({"a_far", {H}});
    } else if (o.mix == MixKind::scale) {
      specs.push_back({"gamma", {H}});
    }
  }
  switch (o.kind) {
    case MixerKind::gdn:
      specs.push_back({"w_a", {H, C}});
      specs.push_back({"w_b", {H, C}});
      specs.push_back({"b_beta", {H}});
      specs.push_back({"A_log", {H}});
      specs.push_back({"dt_bias", {H}});
      break;
    case MixerKind::gla:
      specs.push_back({"w_decay_down", {kDecayRank, C}});
      specs.push_back({"w_decay_up", {H * D, kDecayRank}});
      specs.push_back({"b_decay", {H * D}});
      break;
    case MixerKind::kgla:
      specs.push_back({"w_key_decay", {H, D, D}});
      specs.push_back({"b_key_decay", {H, D}});
      break;
    case MixerKind::hedgehog:
      specs.push_back({"w_feature_q", {H, D, D}});
      specs.push_back({"w_feature_k", {H, D, D}});
      break;
    case MixerKind::none:
      break;
  }
  return specs;
}

template <class S>
void hybrid_forward(const MixerOptions& options, const AttentionShape& shape,
                    const HybridTensors<const S*>& params, const HybridInputs<S>& in, S* y,
                    StateForm form) {
  HybridActivations<S> a;
  hybrid_run_forward(dims_of(options, shape), options, params, in, form, a, y);
}

template <class S>
void hybrid_backward(const MixerOptions& options, const AttentionShape& shape,
                     const HybridTensors<const S*>& p, const HybridTensors<S*>& dp,
                     const HybridInputs<S>& in, const S* dy, const HybridInputGrads<S>& grads) {
  const Dims dm = dims_of(options, shape);
  const int T = in.T, C = dm.C, H = dm.H, G = dm.G, D = dm.D;
  const long nq = (long)T * H * D, nk = (long)T * G * D;
  HybridActivations<S> a;
  Buffer<S> y(nq);
  hybrid_run_forward(dm, options, p, in, StateForm::chunked, a, y.data());

  // 4 mixing
  Buffer<S> dy_exact(dm.has_exact ? nq : 0, S(0)), dy_lin(dm.has_linear ? nq : 0, S(0));
  Buffer<S> dx((long)T * C, S(0)), dqc(nq, S(0)), dkc(nk, S(0)), dvc(nk, S(0));
  Buffer<S> dlse(a.lse.size(), S(0));
  mix_backward(dm, options, p, dp, in.x, a.y_exact.data(), a.y_lin.data(), a.lse.data(),
               a.lambda.data(), dy, T, dy_exact.data(), dy_lin.data(), dx.data(), dlse.data());

  // 3 linear branch
  if (dm.has_linear) {
    const long rows = (long)T * H;
    Buffer<S> dout(rows * dm.Dv, S(0));
    linear_output_backward(dm, a.o.data(), dy_lin.data(), T, dout.data());
    Buffer<S> dqf(rows * dm.Dk, S(0)), dkf(rows * dm.Dk, S(0)), dvf(rows * dm.Dv, S(0));
    Buffer<S> dg(rows * dm.decay_size, S(0)), dbeta(rows, S(0));
    state_backward(dm, a.features, T, dout.data(), dqf.data(), dkf.data(), dvf.data(), dg.data(),
                   dbeta.data());
    linear_features_backward(dm, options, p, dp, in.x, T, 0, in.inv_freq, a.features, dqf.data(),
                             dkf.data(), dvf.data(), dg.data(), dbeta.data(), dx.data(),
                             dqc.data(), dkc.data(), dvc.data());
  }

  // 2 exact branch
  if (dm.has_exact) {
    Buffer<S> dqr(nq, S(0)), dkr(nk, S(0));
    if constexpr (std::is_same_v<S, float>)  // the blocked fp32 kernel
      cpu::attention_backward(dqr.data(), dkr.data(), dvc.data(), dy_exact.data(), a.qr.data(),
                              a.kr.data(), a.vc.data(), T, H, G, D, cpu::AttentionMask{dm.s, dm.w},
                              dlse.empty() ? nullptr : dlse.data());
    else  // fp64: the reference, for gradient checks
      cpu::attention_backward_generic(dqr.data(), dkr.data(), dvc.data(), dy_exact.data(),
                                      a.qr.data(), a.kr.data(), a.vc.data(), T, H, G, D,
                                      cpu::AttentionMask{dm.s, dm.w},
                                      dlse.empty() ? nullptr : dlse.data());
    cpu::rope_rotate_generic(dqr.data(), in.inv_freq, T, H, D, 0, -1);
    cpu::rope_rotate_generic(dkr.data(), in.inv_freq, T, G, D, 0, -1);
    for (long i = 0; i < nq; ++i) dqc[i] += dqr[i];
    for (long i = 0; i < nk; ++i) dkc[i] += dkr[i];
  }

  // 1 short conv
  Buffer<S> dq(nq, S(0)), dk(nk, S(0)), dv(nk, S(0));
  if (options.conv) {
    cpu::short_conv_backward(dq.data(), dp.conv_q, dqc.data(), in.q, p.conv_q, T, H * D);
    cpu::short_conv_backward(dk.data(), dp.conv_k, dkc.data(), in.k, p.conv_k, T, G * D);
    cpu::short_conv_backward(dv.data(), dp.conv_v, dvc.data(), in.v, p.conv_v, T, G * D);
  } else {
    dq.swap(dqc), dk.swap(dkc), dv.swap(dvc);
  }
  accumulate(grads.dx, dx);
  accumulate(grads.dq, dq);
  accumulate(grads.dk, dk);
  accumulate(grads.dv, dv);
}

template void hybrid_forward<float>(const MixerOptions&, const AttentionShape&,
                                    const HybridTensors<const float*>&, const HybridInputs<float>&,
                                    float*, StateForm);
template void hybrid_forward<double>(const MixerOptions&, const AttentionShape&,
                                     const HybridTensors<const double*>&,
                                     const HybridInputs<double>&, double*, StateForm);
template void hybrid_backward<float>(const MixerOptions&, const AttentionShape&,
                                     const HybridTensors<const float*>&,
                                     const HybridTensors<float*>&, const HybridInputs<float>&,
                                     const float*, const HybridInputGrads<float>&);
template void hybrid_backward<double>(const MixerOptions&, const AttentionShape&,
                                      const HybridTensors<const double*>&,
                                      const HybridTensors<double*>&, const HybridInputs<double>&,
                                      const double*, const HybridInputGrads<double>&);

// ---- HybridMixer ----------------------------------------------------------------------------------

HybridMixer::HybridMixer(const MixerOptions& options, const AttentionShape& shape, uint64_t seed)
    : options_(options), shape_(shape) {
  InitRandom random(seed);
  for (TensorSpec& spec : hybrid_tensor_specs(options, shape)) {
    Parameter p;
    p.value = initial_values(spec, shape.D, random);
    p.grad.assign(p.value.size(), 0.0f);
    p.name = std::move(spec.name);
    p.shape = std::move(spec.shape);
    parameters_.push_back(std::move(p));
  }
}

std::vector<Parameter*> HybridMixer::parameters() {
  std::vector<Parameter*> out;
  for (Parameter& p : parameters_) out.push_back(&p);
  return out;
}

HybridTensors<const float*> HybridMixer::tensors() const {
  HybridTensors<const float*> t;
  for (const Parameter& p : parameters_) *hybrid_tensor_slot(t, p.name) = p.value.data();
  return t;
}

void HybridMixer::forward(const MixerInputs& in, float* y) const {
  hybrid_forward<float>(options_, shape_, tensors(),
                        HybridInputs<float>{in.T, in.x, in.q, in.k, in.v, in.inv_freq}, y);
}

void HybridMixer::backward(const MixerInputs& in, const float* dy, const MixerInputGrads& grads) {
  HybridTensors<float*> dp;
  for (Parameter& p : parameters_) *hybrid_tensor_slot(dp, p.name) = p.grad.data();
  hybrid_backward<float>(options_, shape_, tensors(), dp,
                         HybridInputs<float>{in.T, in.x, in.q, in.k, in.v, in.inv_freq}, dy,
                         HybridInputGrads<float>{grads.dx, grads.dq, grads.dk, grads.dv});
}

std::unique_ptr<MixerCache> HybridMixer::make_cache() const {
  const Dims dm = dims_of(options_, shape_);
  const long HD = (long)dm.H * dm.D, GD = (long)dm.G * dm.D;
  auto c = std::make_unique<HybridCache>();
  const int K = cpu::kShortConvWidth - 1;
  if (options_.conv) {
    c->conv_q.assign(K * HD, 0.0f);
    c->conv_k.assign(K * GD, 0.0f);
    c->conv_v.assign(K * GD, 0.0f);
  }
  c->sink_k.assign(dm.s * GD, 0.0f);
  c->sink_v.assign(dm.s * GD, 0.0f);
  c->ring_k.assign(dm.w * GD, 0.0f);
  c->ring_v.assign(dm.w * GD, 0.0f);
  c->gather_k.assign((dm.s + dm.w) * GD, 0.0f);
  c->gather_v.assign((dm.s + dm.w) * GD, 0.0f);
  if (dm.has_linear) {
    c->ring_kf.assign((long)dm.w * dm.H * dm.Dk, 0.0f);
    c->ring_vf.assign((long)dm.w * dm.H * dm.Dv, 0.0f);
    c->ring_g.assign((long)dm.w * dm.H * dm.decay_size, 0.0f);
    c->ring_beta.assign(dm.kind == MixerKind::gdn ? (long)dm.w * dm.H : 0, 0.0f);
    c->state.assign((long)dm.H * dm.Dk * dm.Dv, 0.0f);
  }
  return c;
}

// Prefill of an empty cache with T > 1 tokens: one chunked forward of the whole prompt, then the
// cache is filled from its activations as if the tokens had been decoded one by one (conv history,
// sinks, ring of the last w tokens, and the state of the tokens s .. T−w−1).
void HybridMixer::prefill(MixerCache& base, const MixerInputs& in, float* y) const {
  auto& c = static_cast<HybridCache&>(base);
  const Dims dm = dims_of(options_, shape_);
  const int T = in.T, s = dm.s, w = dm.w, H = dm.H, Dk = dm.Dk, Dv = dm.Dv, nd = dm.decay_size;
  const long HD = (long)H * dm.D, GD = (long)dm.G * dm.D;
  HybridActivations<float> a;
  hybrid_run_forward(dm, options_, tensors(), HybridInputs<float>{T, in.x, in.q, in.k, in.v, in.inv_freq},
                     StateForm::chunked, a, y, dm.has_linear ? c.state.data() : nullptr);
  if (options_.conv) {  // history rows are positions T−3 .. T−1 (zero before the first token)
    const int K = cpu::kShortConvWidth - 1;
    for (int r = 0; r < K; ++r) {
      const int t = T - K + r;
      if (t < 0) continue;
      std::copy_n(in.q + t * HD, HD, c.conv_q.begin() + r * HD);
      std::copy_n(in.k + t * GD, GD, c.conv_k.begin() + r * GD);
      std::copy_n(in.v + t * GD, GD, c.conv_v.begin() + r * GD);
    }
  }
  if (dm.has_exact) {
    for (int j = 0; j < std::min(s, T); ++j) {
      std::copy_n(a.kr.begin() + j * GD, GD, c.sink_k.begin() + j * GD);
      std::copy_n(a.vc.begin() + j * GD, GD, c.sink_v.begin() + j * GD);
    }
    for (int j = std::max(0, T - w); j < T; ++j) {
      const long slot = j % w;
      std::copy_n(a.kr.begin() + j * GD, GD, c.ring_k.begin() + slot * GD);
      std::copy_n(a.vc.begin() + j * GD, GD, c.ring_v.begin() + slot * GD);
      if (!dm.has_linear) continue;
      const LinearFeatures<float>& f = a.features;
      std::copy_n(f.kf.begin() + j * H * Dk, H * Dk, c.ring_kf.begin() + slot * H * Dk);
      std::copy_n(f.vf.begin() + j * H * Dv, H * Dv, c.ring_vf.begin() + slot * H * Dv);
      std::copy_n(f.g.begin() + j * H * nd, H * nd, c.ring_g.begin() + slot * H * nd);
      if (dm.kind == MixerKind::gdn)
        std::copy_n(f.beta.begin() + j * H, H, c.ring_beta.begin() + slot * H);
    }
  }
  c.position = T;
}

// Token by token: the recurrent form. Per token at position t:
//   conv → features of t → push token t − w (leaving the window) into the state (w = 0: token t
//   itself) → store t in sinks/ring → exact attention over sinks ∪ window → read the state → mix.
void HybridMixer::forward_cached(MixerCache& base, const MixerInputs& in, float* y) const {
  auto& c = static_cast<HybridCache&>(base);
  if (c.position == 0 && in.T > 1) return prefill(c, in, y);
  const Dims dm = dims_of(options_, shape_);
  const auto p = tensors();
  const int C = dm.C, H = dm.H, G = dm.G, D = dm.D, s = dm.s, w = dm.w;
  const long HD = (long)H * D, GD = (long)G * D;
  std::vector<float> qc(HD), kc(GD), vc(GD), qr(HD), kr(GD), y_exact(HD), o((long)H * dm.Dv),
      y_lin(HD), lambda(H), lse(H);
  LinearFeatures<float> f;
  for (int i = 0; i < in.T; ++i) {
    const long t = c.position;
    const float* x = in.x + (long)i * C;
    if (options_.conv) {
      conv_step(qc.data(), c.conv_q, in.q + i * HD, p.conv_q, H * D);
      conv_step(kc.data(), c.conv_k, in.k + i * GD, p.conv_k, G * D);
      conv_step(vc.data(), c.conv_v, in.v + i * GD, p.conv_v, G * D);
    } else {
      std::copy_n(in.q + i * HD, HD, qc.begin());
      std::copy_n(in.k + i * GD, GD, kc.begin());
      std::copy_n(in.v + i * GD, GD, vc.begin());
    }
    const int slot = w > 0 ? (int)(t % w) : 0;
    if (dm.has_linear) {
      linear_features_forward(dm, options_, p, x, qc.data(), kc.data(), vc.data(), 1, t,
                              in.inv_freq, f);
      const long nd = dm.decay_size;
      if (w > 0) {
        if (t - w >= s)  // ring slot t mod w still holds token t − w
          state_push(dm, c.state, c.ring_kf.data() + slot * H * dm.Dk,
                     c.ring_vf.data() + slot * H * dm.Dv, c.ring_g.data() + slot * H * nd,
                     c.ring_beta.data() + (dm.kind == MixerKind::gdn ? slot * H : 0));
        std::copy(f.kf.begin(), f.kf.end(), c.ring_kf.begin() + slot * H * dm.Dk);
        std::copy(f.vf.begin(), f.vf.end(), c.ring_vf.begin() + slot * H * dm.Dv);
        std::copy(f.g.begin(), f.g.end(), c.ring_g.begin() + slot * H * nd);
        if (dm.kind == MixerKind::gdn)
          std::copy(f.beta.begin(), f.beta.end(), c.ring_beta.begin() + slot * H);
      } else if (t >= s) {
        state_push(dm, c.state, f.kf.data(), f.vf.data(), f.g.data(), f.beta.data());
      }
      for (int h = 0; h < H; ++h)
        cpu::linear_state_query(o.data() + (long)h * dm.Dv,
                                c.state.data() + (long)h * dm.Dk * dm.Dv,
                                f.qf.data() + (long)h * dm.Dk, dm.Dk, dm.Dv);
      linear_output_forward(dm, o.data(), 1, y_lin.data());
    }
    if (dm.has_exact) {
      std::copy(qc.begin(), qc.end(), qr.begin());
      std::copy(kc.begin(), kc.end(), kr.begin());
      cpu::rope_rotate_generic(qr.data(), in.inv_freq, 1, H, D, t, 1);
      cpu::rope_rotate_generic(kr.data(), in.inv_freq, 1, G, D, t, 1);
      if (t < s) {
        std::copy(kr.begin(), kr.end(), c.sink_k.begin() + t * GD);
        std::copy(vc.begin(), vc.end(), c.sink_v.begin() + t * GD);
      }
      if (w > 0) {
        std::copy(kr.begin(), kr.end(), c.ring_k.begin() + slot * GD);
        std::copy(vc.begin(), vc.end(), c.ring_v.begin() + slot * GD);
      }
      // E_t in position order: sinks j < s, then the window t − w < j ≤ t.
      int n = 0;
      auto gather = [&](const float* k, const float* v) {
        std::copy_n(k, GD, c.gather_k.begin() + n * GD);
        std::copy_n(v, GD, c.gather_v.begin() + n * GD);
        ++n;
      };
      for (long j = 0; j < std::min<long>(s, t + 1); ++j)
        gather(c.sink_k.data() + j * GD, c.sink_v.data() + j * GD);
      for (long j = std::max<long>(s, t - w + 1); j <= t; ++j)
        gather(c.ring_k.data() + (j % w) * GD, c.ring_v.data() + (j % w) * GD);
      cpu::attention_forward_generic(y_exact.data(), qr.data(), c.gather_k.data(),
                                     c.gather_v.data(), 1, n, n - 1, H, G, D,
                                     cpu::AttentionMask{}, lse.data());
    }
    mix_forward(dm, options_, p, x, y_exact.data(), y_lin.data(), lse.data(), 1, t, lambda.data(),
                y + (long)i * HD);
    ++c.position;
  }
}

}  // namespace golinear::mixers
