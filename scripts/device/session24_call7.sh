#!/bin/bash
# Session 24, call 7 (carry: pack.sh of main with every programmatic dependent at the same
# shared-memory carveout (launch.h's kDependentCarveout); extra.tar.xz as vbins/: golinear_base
# (e47e078, the session's start) and golinear_pre (call 4's build)): the hybrid decode tests
# first (stop if they fail), the 8B decode of base, pre and main alternated (B = 1, 4), the
# whole-model batch-1 rows, every GPU test binary, then racecheck of the hybrid decode tests.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
TEST_ARGS='--gtest_filter=*Hybrid*:*Decode*' plain_tests test_mixers_cuda
grep -q "PASSED" /tmp/r/test_mixers_cuda.txt && ! grep -q "FAILED" /tmp/r/test_mixers_cuda.txt || exit 0
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1,4 base:$V/golinear_base pre:$V/golinear_pre main:$G
contexts_ab base:$V/golinear_base main:$G
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_ops_cuda test_kernels_cuda \
  test_attention_cuda test_gated_delta_cuda test_gated_linear_cuda test_mixers_cuda \
  test_model_cuda test_runtime_cuda test_eval_cuda test_analysis_cuda test_train_cuda
printf '%s\n' "racecheck test_mixers_cuda *GpuHybridMixer*" "memcheck test_mixers_cuda *GpuHybridMixer*" |
  SAN_TIMEOUT=120 sanitize
echo "total $(el) s" >> $R
