#!/bin/bash
# Session 23, call 6 (carry: pack.sh of main at de2329f's code; extra.tar.xz as vbins/:
# golinear_prewait and test_model_cuda_prewait = the GEMV's first chunk loaded before its
# pdl_wait (weights are constant through a step; variant.sh of gemm.cu with GL_EXP_PREWAIT)):
# prewait's model tests, the 8B decode of main and prewait alternated, both kernel timelines.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
TEST_ARGS='--gtest_filter=-*TrainedStudent*' BIN_DIR=$V plain_tests test_model_cuda_prewait
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1,4 main:$G prewait:$V/golinear_prewait
timeline main $G
timeline prewait $V/golinear_prewait
echo "total $(el) s" >> $R
