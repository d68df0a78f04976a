// The shipped student of the bundled model (models/tiny-llama3-25m-linear: the default recipe,
// trained on the GPU, an adapter of models/tiny-llama3-25m): for every linearized layer, with its
// trained parameters, the mixer's output at t < s + w (no token has left the exact set) is its
// exact branch's, bit for bit — against mixer `none` with the same conv taps — in the whole-
// sequence forward and in decode; past s + w the state comes in. The GPU twin of this test is
// tests/model/cuda/trained_student_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "mixers/hybrid_mixer.h"
#include "model/linearization.h"
#include "model/transformer.h"
#include "trained_student.h"

namespace golinear {
namespace {


std::vector<float> normal(size_t n, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(engine);
  return v;
}

TEST(TrainedStudent, OutputIsTheExactBranchUntilATokenLeavesTheExactSet) {
  auto model = model_load(test::kShippedStudent);
  ASSERT_TRUE(model.ok()) << model.error();
  const mixers::AttentionShape shape = (*model)->attention_shape();
  int checked = 0;
  for (size_t l = 0; l < (*model)->mixers.size(); ++l) {
    auto* student = dynamic_cast<mixers::HybridMixer*>((*model)->mixers[l].get());
    if (!student) continue;
    const mixers::MixerOptions& o = student->options();
    EXPECT_EQ(o.mix, mixers::MixKind::split) << "layer " << l << ": not the default recipe";
    auto exact_mixer = test::exact_branch_of(*student);
    mixers::HybridMixer& exact = *exact_mixer;
    const int n_exact = o.sinks + o.window, T = n_exact + 40;
    const long row = (long)shape.H * shape.D;
    const auto x = normal((size_t)T * shape.C, 10 + l), q = normal((size_t)T * row, 20 + l),
               k = normal((size_t)T * shape.G * shape.D, 30 + l),
               v = normal((size_t)T * shape.G * shape.D, 40 + l);
    auto inputs = [&](int t0, int n) {
      return mixers::MixerInputs{n, t0, x.data() + (long)t0 * shape.C, q.data() + t0 * row,
                                 k.data() + (long)t0 * shape.G * shape.D,
                                 v.data() + (long)t0 * shape.G * shape.D, (*model)->inv_freq.data()};
    };
    std::vector<float> ys(T * row), ye(T * row), ds(T * row), de(T * row);
    student->forward(inputs(0, T), ys.data());
    exact.forward(inputs(0, T), ye.data());
    auto cs = student->make_cache(), ce = exact.make_cache();
    for (int t = 0; t < T; ++t) {
      student->forward_cached(*cs, inputs(t, 1), ds.data() + t * row);
      exact.forward_cached(*ce, inputs(t, 1), de.data() + t * row);
    }
    for (long i = 0; i < (long)n_exact * row; ++i) {
      ASSERT_EQ(ys[i], ye[i]) << "layer " << l << ", forward, position " << i / row;
      ASSERT_EQ(ds[i], de[i]) << "layer " << l << ", decode, position " << i / row;
    }
    double after = 0;
    for (long i = (long)n_exact * row; i < T * row; ++i) after = std::max(after, (double)std::fabs(ys[i] - ye[i]));
    EXPECT_GT(after, 1e-4) << "layer " << l << ": the linear branch never contributes";
    ++checked;
  }
  EXPECT_GT(checked, 0) << "no linearized layer";
}

}  // namespace
}  // namespace golinear
