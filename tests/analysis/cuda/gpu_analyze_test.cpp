// analyze with the teacher's forward on the GPU (analysis/cuda/gpu_trace.h) against the CPU
// forward, on a random head_dim-64 model: the diagnostics (key concentration, projection
// residual, sink and far mass per layer, head and (layer, kv head, position) point) and a
// student's NMSE. The GPU's q, k, v are bf16 (relative error ≤ 2⁻⁹ per element), so unit keys,
// cosines and attention masses move by ~1e-3; tolerances: 1e-2 absolute on the per-layer and
// per-head means (values in [0, 1]), normalized MSE 1e-3 over the point arrays, 5% relative on the
// student's NMSE of its hybrid layer and 1e-3 absolute on its kept-softmax layer (0 on the CPU;
// on the GPU the CPU's softmax of the bf16 inputs against the GPU's bf16 output). A head or
// layer mix-up in the download moves them by ~1e-1 or more.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "analysis/analyze.h"
#include "analysis/cuda/gpu_trace.h"
#include "kernels/cuda/cuda_test_util.h"
#include "model/cuda/gpu_model.h"
#include "model/cuda/random_models.h"

namespace golinear {
namespace {

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]));
    EXPECT_NEAR(got[i], want[i], tol) << what << "[" << i << "]";
  }
  std::printf("  %-22s max |gpu − cpu| %.3e\n", what, worst);
}

void expect_nmse(const std::vector<double>& got, const std::vector<double>& want, double tol,
                 const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double err = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) err += (got[i] - want[i]) * (got[i] - want[i]), ref += want[i] * want[i];
  std::printf("  %-22s nmse %.3e\n", what, err / ref);
  EXPECT_LT(err / ref, tol) << what;
}

TEST(GpuAnalyze, DiagnosticsMatchCpu) {
  REQUIRE_GPU();
  auto teacher = test::random_model(test::small_llama_config(), 41);
  const int T = 64, N = 2, V = teacher->config.vocab_size;
  std::vector<int32_t> tokens = test::test_tokens(T, V, 1);
  const std::vector<int32_t> second = test::test_tokens(T, V, 2);
  tokens.insert(tokens.end(), second.begin(), second.end());
  std::vector<analysis::StudentMixers> students(1);
  students[0].label = "hybrid";
  students[0].mixers = test::linearized_stack(*teacher, {1}, 8, &students[0].options);
  analysis::AnalysisOptions options;
  options.sinks = 4;
  options.window = 12;

  auto gpu = golinear::model::cuda::gpu_model_upload(*teacher);
  ASSERT_TRUE(gpu.ok()) << gpu.error();
  auto want = analysis::analysis_run(*teacher, students, tokens.data(), N, T, options);
  auto got = analysis::analysis_run(*teacher, golinear::analysis::cuda::gpu_teacher_trace(**gpu), students,
                                    tokens.data(), N, T, options);
  ASSERT_TRUE(want.ok()) << want.error();
  ASSERT_TRUE(got.ok()) << got.error();
  const analysis::AnalysisResult &c = *want, &g = *got;
  expect_close(g.concentration, c.concentration, 1e-2, "concentration");
  expect_close(g.residual, c.residual, 1e-2, "residual");
  expect_close(g.sink_mass, c.sink_mass, 1e-2, "sink_mass");
  expect_close(g.far_mass, c.far_mass, 1e-2, "far_mass");
  expect_close(g.head_concentration, c.head_concentration, 1e-2, "head_concentration");
  expect_close(g.head_sink_mass, c.head_sink_mass, 1e-2, "head_sink_mass");
  expect_nmse(g.point_concentration, c.point_concentration, 1e-3, "point_concentration");
  expect_nmse(g.point_residual, c.point_residual, 1e-3, "point_residual");
  expect_nmse(g.position_far_mass, c.position_far_mass, 1e-3, "position_far_mass");
  ASSERT_EQ(g.students.size(), 1u);
  const auto &gs = g.students[0], &cs = c.students[0];
  std::printf("  student nmse: layer 0 cpu %.4e gpu %.4e, layer 1 cpu %.3e gpu %.3e\n",
              cs.layer_nmse[0], gs.layer_nmse[0], cs.layer_nmse[1], gs.layer_nmse[1]);
  EXPECT_GT(cs.layer_nmse[0], 1e-3);  // a visible error to compare
  EXPECT_NEAR(gs.layer_nmse[0], cs.layer_nmse[0], 0.05 * cs.layer_nmse[0]);
  EXPECT_EQ(cs.layer_nmse[1], 0.0);
  EXPECT_LT(gs.layer_nmse[1], 1e-3);
  expect_nmse(gs.point_nmse, cs.point_nmse, 1e-2, "student point_nmse");
}

}  // namespace
}  // namespace golinear
