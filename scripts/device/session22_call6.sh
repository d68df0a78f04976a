#!/bin/bash
# Session 22, call 8 (carry: pack.sh of main at ca338c8's code; extra.tar.xz as vbins/:
# golinear_b12 / golinear_b16 = the GEMV's grid at 12 / 16 blocks an SM instead of 8 (variant.sh
# of gemm.cu), test_{ops,model,runtime}_cuda_b16 the same for its tests): 8B decode of main, b12
# and b16 alternated (B = 1, 4), b16's decode-path tests, then every GPU test binary of main.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1,4 b8:$G b12:$V/golinear_b12 b16:$V/golinear_b16
TEST_ARGS='--gtest_filter=-*TrainedStudent*' BIN_DIR=$V plain_tests test_ops_cuda_b16 \
  test_model_cuda_b16 test_runtime_cuda_b16
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_ops_cuda test_kernels_cuda \
  test_attention_cuda test_gated_delta_cuda test_gated_linear_cuda test_mixers_cuda \
  test_model_cuda test_runtime_cuda test_eval_cuda test_analysis_cuda test_train_cuda
echo "total $(el) s" >> $R
