#!/bin/bash
# Session 21, call 2 (carry: pack.sh of the tree with the register GEMV of main plus the gate/up
# GEMV with SwiGLU folded in, gemm_nt_swiglu; extra.tar.xz as vbins/: golinear_base = 206be3a's
# CLI): the op tests first (a failure stops the call), 8B decode of base and new alternated
# (B = 1, 4), then the decode-path GPU tests.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
ops_first gemv || exit 0
ROUNDS=3 DECODE_TIMEOUT=30 decode_ab 1,4 base:$V/golinear_base new:$G
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_model_cuda test_runtime_cuda \
  test_eval_cuda test_mixers_cuda
echo "total $(el) s" >> $R
