// The CPU softmax's exponentials (kernels/cpu/fast_exp.h) against std::exp, and their edges.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/fast_exp.h"

namespace golinear::kernels::cpu {
namespace {

// The largest relative error of f against std::exp over [lo, hi] in steps of `step`.
template <class F>
double worst_relative_error(F f, float lo, float hi, float step) {
  double worst = 0;
  for (float x = lo; x <= hi; x += step) {
    const double want = std::exp((double)x);
    worst = std::max(worst, std::abs(f(x) - want) / want);
  }
  return worst;
}

TEST(FastExp, VectorizableMatchesStdExpWithinItsRange) {
  EXPECT_LT(worst_relative_error(exp_vectorizable, -87.0f, 88.0f, 0.00731f), 3e-7);
}

// Past the range: tiny below −87 (2^n clamped at 2^−126), +inf above 88.7, NaN for a NaN or an
// infinite input (the reduction's x − n·ln 2 is ∞ − ∞) — without converting a NaN or an
// infinity to int on the way (undefined behaviour; UBSan builds check).
TEST(FastExp, VectorizableEdges) {
  EXPECT_LE(exp_vectorizable(-100.0f), 1.2e-38f);
  EXPECT_GE(exp_vectorizable(-100.0f), 0.0f);
  EXPECT_TRUE(std::isinf(exp_vectorizable(100.0f)));
  EXPECT_TRUE(std::isnan(exp_vectorizable(std::numeric_limits<float>::infinity())));
  EXPECT_TRUE(std::isnan(exp_vectorizable(std::numeric_limits<float>::quiet_NaN())));
}

TEST(FastExp, NonpositiveMatchesStdExpAndIsZeroBelowItsRange) {
  EXPECT_LT(worst_relative_error(exp_nonpositive, -87.0f, 0.0f, 0.00517f), 3e-7);
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive(-87.4f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-1000.0f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-std::numeric_limits<float>::infinity()), 0.0f);
}

}  // namespace
}  // namespace golinear::kernels::cpu
