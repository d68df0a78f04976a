// The forms of one hybrid mixer must agree: chunked vs recurrent state, whole-sequence forward vs
// the constant-memory decode cache (token by token and in uneven pieces), and the degenerate
// settings against independent references (full softmax attention; a naive GDN recurrence).
#include <gtest/gtest.h>

#include <algorithm>

#include "mixer_test_util.h"
#include "mixers/hybrid_mixer.h"
#include "mixers/softmax_mixer.h"

namespace golinear::mixers {
namespace {

using test::max_abs;
using test::max_abs_diff;

const AttentionShape kShape{16, 4, 2, 8};

struct Recipe {
  MixerKind kind;
  int sinks, window;
  bool conv;
  MixKind mix = MixKind::gate;
  bool linear_rope = false;
};

std::string recipe_name(const ::testing::TestParamInfo<Recipe>& info) {
  const Recipe& r = info.param;
  return to_string(r.kind) + "_s" + std::to_string(r.sinks) + "_w" + std::to_string(r.window) +
         (r.conv ? "_conv" : "_noconv") + "_" + (r.mix == MixKind::gate_lse ? "gate_lse" : to_string(r.mix)) +
         (r.linear_rope ? "_rope" : "");
}

void PrintTo(const Recipe& r, std::ostream* os) {
  *os << to_string(r.kind) << " s=" << r.sinks << " w=" << r.window << " conv=" << r.conv
      << " mix=" << to_string(r.mix) << " linear_rope=" << r.linear_rope;
}

MixerOptions options_of(const Recipe& r) {
  MixerOptions o;
  o.kind = r.kind, o.sinks = r.sinks, o.window = r.window, o.conv = r.conv, o.mix = r.mix;
  o.linear_rope = r.linear_rope;
  return o;
}

// T = 1, T < s, s + w − 1, s + w, s + w + 1, not a multiple of 64, and lengths that put the
// state kernel (N = T − s − w steps) at 64, 65 and 3·64 + 1.
std::vector<int> boundary_lengths(int s, int w) {
  std::vector<int> lengths = {1, 100};
  for (int t : {s - 1, s + w - 1, s + w, s + w + 1, s + w + 64, s + w + 65, s + w + 193, 193})
    if (t >= 1) lengths.push_back(t);
  std::sort(lengths.begin(), lengths.end());
  lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
  return lengths;
}

// fp32 agreement of two computations of y: max-abs error relative to the output scale.
constexpr double kFormTolerance = 2e-5;

class HybridForms : public ::testing::TestWithParam<Recipe> {};

TEST_P(HybridForms, ChunkedStateEqualsRecurrentState) {
  const Recipe r = GetParam();
  if (r.kind == MixerKind::none) GTEST_SKIP() << "no state";
  auto mixer = test::make_hybrid(options_of(r), kShape);
  test::randomize_parameters(*mixer, 11);
  for (int T : boundary_lengths(r.sinks, r.window)) {
    test::SequenceInputs<float> in(kShape, T, 1000 + T);
    std::vector<float> y_chunk((size_t)T * kShape.H * kShape.D), y_rec(y_chunk.size());
    hybrid_forward<float>(mixer->options(), kShape, mixer->tensors(), in.hybrid_inputs(),
                          y_chunk.data(), StateForm::chunked);
    hybrid_forward<float>(mixer->options(), kShape, mixer->tensors(), in.hybrid_inputs(),
                          y_rec.data(), StateForm::recurrent);
    ASSERT_TRUE(std::all_of(y_chunk.begin(), y_chunk.end(), [](float x) { return std::isfinite(x); }));
    EXPECT_LE(max_abs_diff(y_chunk, y_rec), kFormTolerance * std::max(1.0, max_abs(y_rec)))
        << "T=" << T;
  }
}

TEST_P(HybridForms, CachedDecodeEqualsForward) {
  const Recipe r = GetParam();
  auto mixer = test::make_hybrid(options_of(r), kShape);
  test::randomize_parameters(*mixer, 12);
  const long HD = (long)kShape.H * kShape.D;
  for (int T : boundary_lengths(r.sinks, r.window)) {
    test::SequenceInputs<float> in(kShape, T, 2000 + T);
    std::vector<float> y_full(T * HD);
    mixer->forward(in.mixer_inputs(), y_full.data());
    const double tol = kFormTolerance * std::max(1.0, max_abs(y_full));
    // Token by token.
    {
      auto cache = mixer->make_cache();
      std::vector<float> y(T * HD, -99.0f);
      for (int t = 0; t < T; ++t) mixer->forward_cached(*cache, in.slice(kShape, t, 1), y.data() + t * HD);
      EXPECT_EQ(cache->position, T);
      EXPECT_LE(max_abs_diff(y, y_full), tol) << "token by token, T=" << T;
    }
    // A prompt (the chunked prefill), then token by token.
    {
      auto cache = mixer->make_cache();
      std::vector<float> y(T * HD, -99.0f);
      const int prompt = std::max(2, 2 * T / 3);
      mixer->forward_cached(*cache, in.slice(kShape, 0, std::min(prompt, T)), y.data());
      for (int t = prompt; t < T; ++t)
        mixer->forward_cached(*cache, in.slice(kShape, t, 1), y.data() + t * HD);
      EXPECT_LE(max_abs_diff(y, y_full), tol) << "prompt then tokens, T=" << T;
    }
    // Uneven pieces: 5, 1, 30, 5, 1, 30, ...
    {
      auto cache = mixer->make_cache();
      std::vector<float> y(T * HD, -99.0f);
      const int pieces[] = {5, 1, 30};
      for (int t = 0, i = 0; t < T; ++i) {
        const int n = std::min(pieces[i % 3], T - t);
        mixer->forward_cached(*cache, in.slice(kShape, t, n), y.data() + t * HD);
        t += n;
      }
      EXPECT_LE(max_abs_diff(y, y_full), tol) << "pieces, T=" << T;
    }
  }
}

TEST_P(HybridForms, CacheSizeDoesNotGrow) {
  const Recipe r = GetParam();
  auto mixer = test::make_hybrid(options_of(r), kShape);
  test::SequenceInputs<float> in(kShape, 1000, 3000);
  auto cache = mixer->make_cache();
  std::vector<float> y((size_t)1000 * kShape.H * kShape.D);
  const size_t empty = cache->bytes();
  mixer->forward_cached(*cache, in.slice(kShape, 0, 100), y.data());
  const size_t after_100 = cache->bytes();
  for (int t = 100; t < 1000; t += 100)
    mixer->forward_cached(*cache, in.slice(kShape, t, 100), y.data() + (long)t * kShape.H * kShape.D);
  EXPECT_EQ(cache->position, 1000);
  EXPECT_EQ(cache->bytes(), after_100);
  EXPECT_EQ(cache->bytes(), empty);
  EXPECT_GT(cache->bytes(), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Recipes, HybridForms,
    ::testing::Values(
        Recipe{MixerKind::gdn, 3, 5, true}, Recipe{MixerKind::gdn, 3, 5, false},
        Recipe{MixerKind::gdn, 0, 0, true}, Recipe{MixerKind::gdn, 0, 0, false},
        Recipe{MixerKind::gdn, 3, 0, false}, Recipe{MixerKind::gdn, 0, 5, true},
        Recipe{MixerKind::gdn, 8, 56, true}, Recipe{MixerKind::gdn, 3, 5, true, MixKind::add},
        Recipe{MixerKind::gdn, 3, 5, true, MixKind::scale},
        Recipe{MixerKind::gdn, 3, 5, true, MixKind::gate, true},
        Recipe{MixerKind::gla, 3, 5, true}, Recipe{MixerKind::gla, 0, 0, false},
        Recipe{MixerKind::gla, 0, 5, false}, Recipe{MixerKind::gla, 8, 56, true},
        Recipe{MixerKind::kgla, 3, 5, true}, Recipe{MixerKind::kgla, 0, 0, true},
        Recipe{MixerKind::hedgehog, 3, 5, true}, Recipe{MixerKind::hedgehog, 0, 0, false},
        Recipe{MixerKind::hedgehog, 2, 3, true, MixKind::scale, true},
        Recipe{MixerKind::none, 3, 5, true}, Recipe{MixerKind::none, 0, 5, false},
        Recipe{MixerKind::gdn, 3, 5, true, MixKind::gate_lse},
        Recipe{MixerKind::gdn, 8, 56, true, MixKind::gate_lse},
        Recipe{MixerKind::gdn, 3, 0, false, MixKind::gate_lse},
        Recipe{MixerKind::gla, 0, 5, false, MixKind::gate_lse},
        Recipe{MixerKind::gdn, 3, 5, true, MixKind::split},
        Recipe{MixerKind::gdn, 8, 56, true, MixKind::split},
        Recipe{MixerKind::gdn, 0, 5, false, MixKind::split}),
    recipe_name);

// Window covering the whole sequence, no sinks, no conv: the exact branch is full causal softmax
// attention, so `none` and gdn with the gate forced shut (λ = σ(−10⁴) = 0) equal SoftmaxMixer.
TEST(HybridExactBranch, FullWindowEqualsSoftmaxAttention) {
  const int T = 37;
  test::SequenceInputs<float> in(kShape, T, 4000);
  SoftmaxMixer teacher(kShape);
  std::vector<float> y_teacher((size_t)T * kShape.H * kShape.D);
  teacher.forward(in.mixer_inputs(), y_teacher.data());
  for (MixerKind kind : {MixerKind::none, MixerKind::gdn}) {
    MixerOptions o;
    o.kind = kind, o.sinks = 0, o.window = T, o.conv = false;
    auto mixer = test::make_hybrid(o, kShape);
    test::randomize_parameters(*mixer, 13);
    for (Parameter* p : mixer->parameters())
      if (p->name == "b_lambda") std::fill(p->value.begin(), p->value.end(), -1e4f);
    std::vector<float> y(y_teacher.size());
    mixer->forward(in.mixer_inputs(), y.data());
    EXPECT_LE(max_abs_diff(y, y_teacher), 1e-5) << to_string(kind);
    auto cache = mixer->make_cache();
    mixer->forward_cached(*cache, in.mixer_inputs(), y.data());
    EXPECT_LE(max_abs_diff(y, y_teacher), 1e-5) << to_string(kind) << " cached";
  }
}

// gate-lse with c_lse = 0 is gate: the same parameters otherwise give the same output (whole
// sequence and decode), and the same gradients; with c_lse ≠ 0 the output differs.
TEST(HybridGateLse, ZeroCoefficientEqualsGate) {
  const int T = 150;
  MixerOptions o_gate;
  o_gate.mix = MixKind::gate, o_gate.sinks = 8, o_gate.window = 24;
  MixerOptions o_lse = o_gate;
  o_lse.mix = MixKind::gate_lse;
  auto gate = test::make_hybrid(o_gate, kShape);
  auto lse = test::make_hybrid(o_lse, kShape);
  test::randomize_parameters(*gate, 15);
  const auto gp = gate->parameters();
  auto lp = lse->parameters();
  ASSERT_EQ(lp.size(), gp.size() + 1);
  for (Parameter* p : lp) {
    if (p->name == "c_lse") {
      EXPECT_EQ(p->value, std::vector<float>(kShape.H, 0.0f)) << "c_lse initialises to 0";
      continue;
    }
    for (Parameter* g : gp)
      if (g->name == p->name) p->value = g->value;
  }
  test::SequenceInputs<float> in(kShape, T, 6000);
  const long n = (long)T * kShape.H * kShape.D;
  std::vector<float> y_gate(n), y_lse(n), y_dec(n);
  gate->forward(in.mixer_inputs(), y_gate.data());
  lse->forward(in.mixer_inputs(), y_lse.data());
  EXPECT_LE(max_abs_diff(y_gate, y_lse), 1e-6 * std::max(1.0, max_abs(y_gate)));
  auto cache = lse->make_cache();
  for (int t = 0; t < T; ++t)
    lse->forward_cached(*cache, in.slice(kShape, t, 1), y_dec.data() + (long)t * kShape.H * kShape.D);
  EXPECT_LE(max_abs_diff(y_gate, y_dec), kFormTolerance * std::max(1.0, max_abs(y_gate)));
  const auto dy = test::random_normal<float>(n, 6001);
  std::vector<float> dq_gate(in.q.size()), dq_lse(in.q.size());
  gate->backward(in.mixer_inputs(), dy.data(), MixerInputGrads{nullptr, dq_gate.data(), nullptr, nullptr});
  lse->backward(in.mixer_inputs(), dy.data(), MixerInputGrads{nullptr, dq_lse.data(), nullptr, nullptr});
  EXPECT_LE(max_abs_diff(dq_gate, dq_lse), 1e-6 * std::max(1.0, max_abs(dq_gate)));
  for (Parameter* p : lp)
    if (p->name == "c_lse") {
      EXPECT_GT(max_abs(p->grad), 0.0) << "c_lse gets a gradient at 0";
      std::fill(p->value.begin(), p->value.end(), 0.5f);
    }
  lse->forward(in.mixer_inputs(), y_lse.data());
  EXPECT_GT(max_abs_diff(y_gate, y_lse), 1e-3);
}

// s = w = 0 with random parameters: y_t = q̂_tᵀ S_t, evaluated here from DESIGN.md §3 with
// explicit (D × D) matrices in fp64, conv included.
TEST(HybridGdn, PureReplacementEqualsNaiveRecurrence) {
  const auto [C, H, G, D] = kShape;
  const int T = 40, group = H / G, K = 4;
  MixerOptions o;
  o.sinks = o.window = 0;
  auto mixer = test::make_hybrid(o, kShape);
  test::randomize_parameters(*mixer, 14);
  test::SequenceInputs<float> in(kShape, T, 5000);
  std::vector<float> y((size_t)T * H * D);
  mixer->forward(in.mixer_inputs(), y.data());

  auto param = [&](const std::string& name) {
    for (Parameter* p : mixer->parameters())
      if (p->name == name) return std::vector<double>(p->value.begin(), p->value.end());
    ADD_FAILURE() << "missing " << name;
    return std::vector<double>();
  };
  const auto conv_q = param("conv_q"), conv_k = param("conv_k"), conv_v = param("conv_v");
  const auto w_a = param("w_a"), w_b = param("w_b"), b_beta = param("b_beta"),
             A_log = param("A_log"), dt_bias = param("dt_bias");
  // Causal conv of one channel c of a (T, N) input at time t.
  auto conv = [&](const std::vector<float>& x, const std::vector<double>& w, int N, int t, int c) {
    double acc = 0;
    for (int i = 0; i < K; ++i)
      if (t - (K - 1) + i >= 0) acc += w[c * K + i] * x[(long)(t - (K - 1) + i) * N + c];
    return acc;
  };
  auto unit = [](std::vector<double> a) {
    double n = 0;
    for (double x : a) n += x * x;
    for (double& x : a) x /= std::sqrt(n + 1e-6);
    return a;
  };
  using Matrix = std::vector<std::vector<double>>;  // [D][D]
  double worst = 0;
  for (int h = 0; h < H; ++h) {
    const int g = h / group;
    Matrix S(D, std::vector<double>(D, 0.0));
    for (int t = 0; t < T; ++t) {
      std::vector<double> q(D), k(D), v(D);
      for (int d = 0; d < D; ++d) {
        q[d] = conv(in.q, conv_q, H * D, t, h * D + d);
        k[d] = conv(in.k, conv_k, G * D, t, g * D + d);
        v[d] = conv(in.v, conv_v, G * D, t, g * D + d);
      }
      q = unit(q), k = unit(k);
      double xa = dt_bias[h], xb = b_beta[h];
      for (int c = 0; c < C; ++c) {
        xa += w_a[h * C + c] * in.x[t * C + c];
        xb += w_b[h * C + c] * in.x[t * C + c];
      }
      const double alpha = std::exp(-std::exp(A_log[h]) * std::log1p(std::exp(xa)));
      const double beta = 1 / (1 + std::exp(-xb));
      // S ← α (I − β k kᵀ) S + β k vᵀ, as matrices.
      Matrix M(D, std::vector<double>(D)), next(D, std::vector<double>(D, 0.0));
      for (int i = 0; i < D; ++i)
        for (int j = 0; j < D; ++j) M[i][j] = alpha * ((i == j) - beta * k[i] * k[j]);
      for (int i = 0; i < D; ++i)
        for (int j = 0; j < D; ++j) {
          for (int m = 0; m < D; ++m) next[i][j] += M[i][m] * S[m][j];
          next[i][j] += beta * k[i] * v[j];
        }
      S = next;
      for (int j = 0; j < D; ++j) {
        double out = 0;
        for (int i = 0; i < D; ++i) out += q[i] * S[i][j];
        worst = std::max(worst, std::abs(out - y[((long)t * H + h) * D + j]));
      }
    }
  }
  EXPECT_LE(worst, 1e-5);
}

}  // namespace
}  // namespace golinear::mixers

namespace golinear::mixers {
namespace {

// Mix split is exact where exactness is possible: while no token has left the exact set
// (t < s + w) the output is the exact branch alone, to the bit, whatever the (random, trained-like)
// parameters: compared with mixer `none` (the exact branch alone) sharing the conv taps, whole
// sequence and decode. Past s + w the linear branch comes in.
TEST(HybridSplit, ExactBranchUntilATokenLeavesTheExactSet) {
  const int T = 90, s = 4, w = 20;
  MixerOptions o_split;
  o_split.mix = MixKind::split, o_split.sinks = s, o_split.window = w;
  MixerOptions o_none = o_split;
  o_none.kind = MixerKind::none;
  auto split = test::make_hybrid(o_split, kShape);
  auto none = test::make_hybrid(o_none, kShape);
  test::randomize_parameters(*split, 31);
  for (Parameter* p : none->parameters())
    for (Parameter* q : split->parameters())
      if (q->name == p->name) p->value = q->value;
  test::SequenceInputs<float> in(kShape, T, 7000);
  const long row = (long)kShape.H * kShape.D, n = T * row;
  std::vector<float> y_split(n), y_none(n), y_dec(n), y_none_dec(n);
  split->forward(in.mixer_inputs(), y_split.data());
  none->forward(in.mixer_inputs(), y_none.data());
  auto cache = split->make_cache();
  auto none_cache = none->make_cache();
  for (int t = 0; t < T; ++t) {
    split->forward_cached(*cache, in.slice(kShape, t, 1), y_dec.data() + t * row);
    none->forward_cached(*none_cache, in.slice(kShape, t, 1), y_none_dec.data() + t * row);
  }
  for (long i = 0; i < (long)(s + w) * row; ++i) {
    ASSERT_EQ(y_split[i], y_none[i]) << "whole sequence, position " << i / row;
    ASSERT_EQ(y_dec[i], y_none_dec[i]) << "decode, position " << i / row;
  }
  double after = 0;
  for (long i = (long)(s + w) * row; i < n; ++i) after = std::max(after, (double)std::fabs(y_split[i] - y_none[i]));
  EXPECT_GT(after, 1e-3) << "the linear branch never contributes";
}

// split initialises to the gate masked where no token is far (a = c = 0, b = −2): with the same
// other parameters it equals gate from position s + w on, and the exact branch before.
TEST(HybridSplit, InitialisesToTheMaskedGate) {
  const int T = 90, s = 4, w = 20;
  MixerOptions o_gate;
  o_gate.mix = MixKind::gate, o_gate.sinks = s, o_gate.window = w;
  MixerOptions o_split = o_gate;
  o_split.mix = MixKind::split;
  auto gate = test::make_hybrid(o_gate, kShape);
  auto split = test::make_hybrid(o_split, kShape);
  test::randomize_parameters(*gate, 41);
  for (Parameter* p : split->parameters()) {
    if (p->name == "c_lse" || p->name == "a_far") {
      EXPECT_EQ(p->value, std::vector<float>(kShape.H, 0.0f)) << p->name;
      continue;
    }
    if (p->name == "b_lambda") EXPECT_EQ(p->value, std::vector<float>(kShape.H, -2.0f));
    for (Parameter* g : gate->parameters())
      if (g->name == p->name) p->value = g->value;
  }
  test::SequenceInputs<float> in(kShape, T, 7100);
  const long row = (long)kShape.H * kShape.D, n = T * row;
  std::vector<float> y_gate(n), y_split(n);
  gate->forward(in.mixer_inputs(), y_gate.data());
  split->forward(in.mixer_inputs(), y_split.data());
  for (long i = (long)(s + w) * row; i < n; ++i) ASSERT_EQ(y_split[i], y_gate[i]) << i / row;
  double before = 0;
  for (long i = 0; i < (long)(s + w) * row; ++i) before = std::max(before, (double)std::fabs(y_split[i] - y_gate[i]));
  EXPECT_GT(before, 1e-3) << "gate scales the exact branch by 1 − λ where split does not";
}

}  // namespace
}  // namespace golinear::mixers
