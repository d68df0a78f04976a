// The CPU softmax's exponentials (kernels/cpu/fast_exp.h) against std::exp, and their edges.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/cpu/fast_exp.h"

namespace golinear::kernels::cpu {
namespace {

TEST(FastExp, VectorizableMatchesStdExpWithinItsRange) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.00731f) {
    const double want = std::exp((double)x);
    worst = std::max(worst, std::abs(exp_vectorizable(x) - want) / want);
  }
  EXPECT_LT(worst, 3e-7) << "largest relative error";
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
  double worst = 0;
  for (float x = -87.0f; x <= 0.0f; x += 0.00517f) {
    const double want = std::exp((double)x);
    worst = std::max(worst, std::abs(exp_nonpositive(x) - want) / want);
  }
  EXPECT_LT(worst, 3e-7) << "largest relative error";
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive(-87.4f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-1000.0f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-std::numeric_limits<float>::infinity()), 0.0f);
}

}  // namespace
}  // namespace golinear::kernels::cpu
