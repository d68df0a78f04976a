// Timing of the default recipe at a training shape (T=2048, C=512, H=8, G=2, D=64). Disabled by
// default (timings belong to bench/); run with --gtest_also_run_disabled_tests.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "mixer_test_util.h"

namespace golinear::mixers {
namespace {

TEST(HybridTiming, DISABLED_ForwardBackwardAtT2048) {
  const AttentionShape shape{512, 8, 2, 64};
  const int T = 2048;
  test::SequenceInputs<float> in(shape, T, 1);
  const auto dy = test::random_normal<float>((size_t)T * shape.H * shape.D, 2);
  for (MixerKind kind : {MixerKind::gdn, MixerKind::gla, MixerKind::kgla, MixerKind::hedgehog,
                         MixerKind::none}) {
    MixerOptions o;
    o.kind = kind;
    auto mixer = test::make_hybrid(o, shape);
    std::vector<float> y((size_t)T * shape.H * shape.D), dx(in.x.size()), dq(in.q.size()),
        dk(in.k.size()), dv(in.v.size());
    using clock = std::chrono::steady_clock;
    auto t0 = clock::now();
    mixer->forward(in.mixer_inputs(), y.data());
    auto t1 = clock::now();
    mixer->backward(in.mixer_inputs(), dy.data(),
                    MixerInputGrads{dx.data(), dq.data(), dk.data(), dv.data()});
    auto t2 = clock::now();
    // Prefill of T − 256 tokens (chunked), then 256 decode steps (recurrent).
    const int decode = 256;
    auto cache = mixer->make_cache();
    std::vector<float> yc(y.size());
    mixer->forward_cached(*cache, in.slice(shape, 0, T - decode), yc.data());
    auto t3 = clock::now();
    for (int t = T - decode; t < T; ++t)
      mixer->forward_cached(*cache, in.slice(shape, t, 1), yc.data() + (long)t * shape.H * shape.D);
    auto t4 = clock::now();
    auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    std::printf("%-9s forward %6.1f ms  backward (incl. forward) %6.1f ms  prefill %6.1f ms  "
                "decode %.3f ms/token  cache %zu bytes\n",
                to_string(kind).c_str(), ms(t0, t1), ms(t1, t2), ms(t2, t3), ms(t3, t4) / decode,
                cache->bytes());
    EXPECT_LE(test::max_abs_diff(yc, y), 1e-4 * std::max(1.0, test::max_abs(y)));
  }
}

}  // namespace
}  // namespace golinear::mixers
