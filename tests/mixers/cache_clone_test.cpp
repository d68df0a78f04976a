// A cloned decode cache continues independently of the original: after a shared prefix A, the
// clone fed B and the original fed C each equal forward() over A+B resp. A+C, for every mixer
// (the teacher's softmax cache and every hybrid recipe).
#include <gtest/gtest.h>

#include "mixer_test_util.h"
#include "mixers/hybrid_mixer.h"
#include "mixers/softmax_mixer.h"

namespace golinear::mixers {
namespace {

using test::max_abs;
using test::max_abs_diff;

const AttentionShape kShape{16, 4, 2, 8};
constexpr double kTolerance = 2e-5;  // max-abs error relative to the output scale (fp32)

struct CloneCase {
  std::string name;
  bool softmax = false;  // SoftmaxMixer (window < 0: full attention, else the sinks+window mask)
  MixerOptions options;
  int prefix = 0;  // tokens of A
};

std::unique_ptr<Mixer> make_mixer(const CloneCase& c) {
  if (c.softmax) {
    kernels::cpu::AttentionMask mask;
    if (c.options.window > 0) mask.sinks = c.options.sinks, mask.window = c.options.window;
    return std::make_unique<SoftmaxMixer>(kShape, mask);
  }
  auto mixer = test::make_hybrid(c.options, kShape, 7);
  test::randomize_parameters(*mixer, 11);
  return mixer;
}

// y over the whole sequence [A, cont] (rows of the continuation only).
std::vector<float> reference_rows(const Mixer& mixer, const test::SequenceInputs<float>& in, int prefix) {
  const long HD = (long)kShape.H * kShape.D;
  std::vector<float> y((long)in.T * HD);
  mixer.forward(in.mixer_inputs(), y.data());
  return std::vector<float>(y.begin() + prefix * HD, y.end());
}

class CacheClone : public ::testing::TestWithParam<CloneCase> {};

TEST_P(CacheClone, CloneAndOriginalContinueIndependently) {
  const CloneCase& c = GetParam();
  auto mixer = make_mixer(c);
  const long HD = (long)kShape.H * kShape.D;
  const int A = c.prefix, nb = 9, nc = 13;
  // A+B and A+C share the rows of A (same seed, then B and C differ).
  test::SequenceInputs<float> ab(kShape, A + nb, 100), ac(kShape, A + nc, 200);
  auto copy_prefix = [&](std::vector<float>& to, const std::vector<float>& from, long width) {
    std::copy_n(from.begin(), (long)A * width, to.begin());
  };
  copy_prefix(ac.x, ab.x, kShape.C);
  copy_prefix(ac.q, ab.q, HD);
  copy_prefix(ac.k, ab.k, (long)kShape.G * kShape.D);
  copy_prefix(ac.v, ab.v, (long)kShape.G * kShape.D);

  auto original = mixer->make_cache();
  std::vector<float> y_prefix((long)A * HD);
  if (A > 0) mixer->forward_cached(*original, ab.slice(kShape, 0, A), y_prefix.data());
  auto copy = original->clone();
  EXPECT_EQ(copy->bytes(), original->bytes());
  EXPECT_EQ(copy->position, original->position);

  // B into the clone in two pieces (a prompt-sized one, then token by token), C into the
  // original token by token, interleaved so that any shared storage would show.
  std::vector<float> yb((long)nb * HD), yc((long)nc * HD);
  mixer->forward_cached(*copy, ab.slice(kShape, A, 4), yb.data());
  for (int t = 0; t < nc; ++t) {
    mixer->forward_cached(*original, ac.slice(kShape, A + t, 1), yc.data() + t * HD);
    if (4 + t < nb) mixer->forward_cached(*copy, ab.slice(kShape, A + 4 + t, 1), yb.data() + (4 + t) * HD);
  }
  const std::vector<float> want_b = reference_rows(*mixer, ab, A), want_c = reference_rows(*mixer, ac, A);
  EXPECT_LE(max_abs_diff(yb, want_b), kTolerance * std::max(1.0, max_abs(want_b)));
  EXPECT_LE(max_abs_diff(yc, want_c), kTolerance * std::max(1.0, max_abs(want_c)));
  EXPECT_EQ(copy->position, A + nb);
  EXPECT_EQ(original->position, A + nc);
}

MixerOptions opts(MixerKind kind, int s, int w, bool conv) {
  MixerOptions o;
  o.kind = kind, o.sinks = s, o.window = w, o.conv = conv;
  return o;
}

std::vector<CloneCase> cases() {
  std::vector<CloneCase> out;
  for (int prefix : {1, 2, 30}) {
    const std::string p = "_A" + std::to_string(prefix);
    out.push_back({"softmax" + p, true, opts(MixerKind::none, 0, -1, false), prefix});
    out.push_back({"softmax_sinks_window" + p, true, opts(MixerKind::none, 3, 5, false), prefix});
    out.push_back({"none_s3_w5_conv" + p, false, opts(MixerKind::none, 3, 5, true), prefix});
    out.push_back({"gdn_s3_w5_conv" + p, false, opts(MixerKind::gdn, 3, 5, true), prefix});
    out.push_back({"gdn_s0_w0_noconv" + p, false, opts(MixerKind::gdn, 0, 0, false), prefix});
    out.push_back({"gdn_s8_w56_conv" + p, false, opts(MixerKind::gdn, 8, 56, true), prefix});
    out.push_back({"gla_s3_w5_conv" + p, false, opts(MixerKind::gla, 3, 5, true), prefix});
    out.push_back({"gla_s0_w5_noconv" + p, false, opts(MixerKind::gla, 0, 5, false), prefix});
    out.push_back({"kgla_s3_w5_conv" + p, false, opts(MixerKind::kgla, 3, 5, true), prefix});
    out.push_back({"hedgehog_s3_w5_conv" + p, false, opts(MixerKind::hedgehog, 3, 5, true), prefix});
    out.push_back({"hedgehog_s0_w0_noconv" + p, false, opts(MixerKind::hedgehog, 0, 0, false), prefix});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Mixers, CacheClone, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<CloneCase>& info) { return info.param.name; });

}  // namespace
}  // namespace golinear::mixers
