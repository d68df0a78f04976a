#!/bin/bash
# Session 23, call 3 (carry: pack.sh of main with the GEMV held to 4 blocks an SM (a shared-memory
# floor, carveout max shared) and the staged decode kernel launched with carveout max shared at
# every split; extra.tar.xz as vbins/: gemv_micro (relinked), golinear_old (37a04ca),
# golinear_nostage2 (call 2's: 48-register GEMV at 5 blocks an SM, unstaged),
# golinear_nostage3 (this GEMV, unstaged: GL_EXP_NOSTAGE), golinear_nocarve (staged, the decode
# kernel's carveout left to the driver as before: GL_EXP_NOCARVE)): op and mixer tests, the GEMV
# microbenchmark, the 8B decode of the five alternated, the kernel timelines of main and nostage3.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
ops_first gemv || exit 0
plain_tests test_mixers_cuda
gemv_micro
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1,4 old:$V/golinear_old nostage2:$V/golinear_nostage2 \
  nostage3:$V/golinear_nostage3 nocarve:$V/golinear_nocarve main:$G
timeline main $G
timeline nostage3 $V/golinear_nostage3
timeline old $V/golinear_old
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_model_cuda test_runtime_cuda
echo "total $(el) s" >> $R
