#!/bin/bash
# Session 22, call 7 (carry: pack.sh of main + the GEMV's grid capped at the blocks the GPU holds
# at once (gemv_resident_blocks: 4 an SM at 64 registers, one wave) instead of 8 an SM (two
# waves); extra.tar.xz as vbins/: golinear_base = 206be3a's CLI, golinear_b8 = the same tree
# with 8 blocks an SM (variant.sh of gemm.cu)): the op tests first, the decode-path GPU tests, 8B
# decode of b8 and new alternated (B = 1, 4), the in-graph kernel times of both.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
ops_first "gemv y \(N=1003" || exit 0
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_model_cuda test_runtime_cuda \
  test_eval_cuda test_mixers_cuda
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1,4 b8:$V/golinear_b8 new:$G
timeline b8 $V/golinear_b8
timeline new $G
echo "total $(el) s" >> $R
