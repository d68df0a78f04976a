#!/bin/bash
# Session 24, call 1 (carry: pack.sh of the hybrid decode kernel launched dependent, its front
# end before the wait; extra.tar.xz as vbins/: golinear_base (e47e078, the session's start)): the
# hybrid decode tests first (stop if they fail), the 8B decode of base and new alternated (B = 1,
# 4), both batch-1 timelines, the whole-model batch-1 rows, then every GPU test binary.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
TEST_ARGS='--gtest_filter=*Hybrid*:*Decode*' plain_tests test_mixers_cuda
grep -q "PASSED" /tmp/r/test_mixers_cuda.txt && ! grep -q "FAILED" /tmp/r/test_mixers_cuda.txt || exit 0
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1,4 base:$V/golinear_base new:$G
timeline base $V/golinear_base
timeline new $G
contexts_ab base:$V/golinear_base new:$G
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_ops_cuda test_kernels_cuda \
  test_attention_cuda test_gated_delta_cuda test_gated_linear_cuda test_mixers_cuda \
  test_model_cuda test_runtime_cuda test_eval_cuda test_analysis_cuda test_train_cuda
echo "total $(el) s" >> $R
