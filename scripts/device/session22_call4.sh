#!/bin/bash
# Session 22, call 6 (carry: pack.sh of main + the decode step's norms folded into the products
# that add into the residual, gemm_nt_add_rmsnorm: the last block norms the row; extra.tar.xz as
# vbins/: golinear_base = 206be3a's CLI, golinear_nofold = the same tree with the fold off
# (variant.sh of gemm.cu: the GEMV, then the norm kernel)): the op tests first (the fold's bits
# against the two steps), the decode-path GPU tests, 8B decode of nofold and new alternated
# (B = 1, 4), the in-graph kernel times of both.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
ops_first "gemv h|gemv y \(N=1003" || exit 0
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_model_cuda test_runtime_cuda \
  test_eval_cuda test_mixers_cuda
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1,4 nofold:$V/golinear_nofold new:$G
timeline nofold $V/golinear_nofold
timeline new $G
echo "total $(el) s" >> $R
