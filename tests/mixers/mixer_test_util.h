// Helpers shared by the mixer tests: a small attention shape, random inputs, random parameters
// (so that gates and decays are non-trivial) and fp64 copies of a mixer's parameters.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "mixers/hybrid_mixer.h"
#include "mixers/mixer_factory.h"

namespace golinear::mixers::test {

template <class S = float>
std::vector<S> random_normal(size_t n, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 engine(seed);
  auto uniform = [&] { return ((engine() >> 11) + 0.5) * 0x1.0p-53; };
  std::vector<S> v(n);
  for (auto& x : v) x = (S)(scale * std::sqrt(-2 * std::log(uniform())) * std::cos(6.283185307179586 * uniform()));
  return v;
}

inline std::vector<float> inv_freq_for(int D) {
  std::vector<float> f(D / 2);
  for (int i = 0; i < D / 2; ++i) f[i] = std::pow(10000.0f, -2.0f * i / D);
  return f;
}

// Inputs of one sequence in scalar S.
template <class S>
struct SequenceInputs {
  int T;
  std::vector<S> x, q, k, v;
  std::vector<float> inv_freq;
  SequenceInputs(const AttentionShape& sh, int T_, uint64_t seed) : T(T_) {
    x = random_normal<S>((size_t)T * sh.C, seed);
    q = random_normal<S>((size_t)T * sh.H * sh.D, seed + 1);
    k = random_normal<S>((size_t)T * sh.G * sh.D, seed + 2);
    v = random_normal<S>((size_t)T * sh.G * sh.D, seed + 3);
    inv_freq = inv_freq_for(sh.D);
  }
  MixerInputs mixer_inputs() const {  // S = float only
    return MixerInputs{T, 0, x.data(), q.data(), k.data(), v.data(), inv_freq.data()};
  }
  HybridInputs<S> hybrid_inputs() const {
    return HybridInputs<S>{T, x.data(), q.data(), k.data(), v.data(), inv_freq.data()};
  }
  // Rows [t0, t0 + n) as MixerInputs at position t0.
  MixerInputs slice(const AttentionShape& sh, int t0, int n) const {
    return MixerInputs{n,
                       t0,
                       x.data() + (long)t0 * sh.C,
                       q.data() + (long)t0 * sh.H * sh.D,
                       k.data() + (long)t0 * sh.G * sh.D,
                       v.data() + (long)t0 * sh.G * sh.D,
                       inv_freq.data()};
  }
};

// Moves every parameter away from its initial value (conv taps, gates, decays all non-trivial).
inline void randomize_parameters(Mixer& mixer, uint64_t seed, double scale = 0.3) {
  for (Parameter* p : mixer.parameters()) {
    const auto noise = random_normal<float>(p->value.size(), seed++, scale);
    for (size_t i = 0; i < noise.size(); ++i) p->value[i] += noise[i];
  }
}

inline std::unique_ptr<HybridMixer> make_hybrid(const MixerOptions& o, const AttentionShape& sh,
                                                uint64_t seed = 1) {
  auto mixer = mixer_create(o, sh, seed);
  EXPECT_TRUE(mixer.ok()) << (mixer.ok() ? "" : mixer.error());
  return std::unique_ptr<HybridMixer>(static_cast<HybridMixer*>(std::move(mixer).value().release()));
}

// fp64 copies of a mixer's parameter values and zeroed gradients, with tensor views.
struct DoubleParameters {
  std::vector<std::string> names;
  std::vector<std::vector<double>> values, grads;
  explicit DoubleParameters(HybridMixer& mixer) {
    for (Parameter* p : mixer.parameters()) {
      names.push_back(p->name);
      values.emplace_back(p->value.begin(), p->value.end());
      grads.emplace_back(p->value.size(), 0.0);
    }
  }
  HybridTensors<const double*> view() const {
    HybridTensors<const double*> t;
    for (size_t i = 0; i < names.size(); ++i) *hybrid_tensor_slot(t, names[i]) = values[i].data();
    return t;
  }
  HybridTensors<double*> grad_view() {
    HybridTensors<double*> t;
    for (size_t i = 0; i < names.size(); ++i) *hybrid_tensor_slot(t, names[i]) = grads[i].data();
    return t;
  }
};

using kernels::test::max_abs;
using kernels::test::max_abs_diff;
using kernels::test::nmse;

}  // namespace golinear::mixers::test
