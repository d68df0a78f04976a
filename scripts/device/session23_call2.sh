#!/bin/bash
# Session 23, call 2 (carry: pack.sh of main with the software-pipelined GEMV (gemm.cu) and the
# staged split decode kernel (hybrid.cu); extra.tar.xz as vbins/: gemv_micro (relinked against
# the new GEMV), golinear_old (37a04ca), golinear_nostage and test_mixers_cuda_nostage (the new
# GEMV, the decode kernel unstaged: variant.sh of hybrid.cu with GL_EXP_NOSTAGE), golinear_stph
# (GL_EXP_PHASES on the staged kernel), golinear_phases (call 1's: 37a04ca with the phases)):
# the op and mixer tests first, the GEMV microbenchmark, the staged kernel's phases, the 8B decode
# of old / nostage / main alternated, then every GPU test binary of main.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
ops_first gemv || exit 0
plain_tests test_mixers_cuda
gemv_micro
for n in stph phases; do decode_probe $n $V/golinear_$n "^phases" 8; done
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1,4 old:$V/golinear_old nostage:$V/golinear_nostage main:$G
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_kernels_cuda \
  test_attention_cuda test_model_cuda test_runtime_cuda test_eval_cuda test_analysis_cuda \
  test_gated_delta_cuda test_gated_linear_cuda test_train_cuda
echo "total $(el) s" >> $R
