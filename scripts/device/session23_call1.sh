#!/bin/bash
# Session 23, call 1 (carry: pack.sh of main at 37a04ca; extra.tar.xz as vbins/: gemv_micro
# (scripts/device/gemv_micro.cu: the decode step's one-row products alone, main's GEMV beside
# candidates), golinear_phases (variant.sh of hybrid.cu with GL_EXP_PHASES: the hybrid decode
# kernel's phases in SM cycles, printed by two blocks every 512 launches), golinear_early and
# its tests (GL_EXP_EARLY: the decode kernel's blocks count themselves in at the start, after
# reading the position, instead of fence + count at the end), golinear_earlyph (both)):
# the GEMV microbenchmark, the phases, the 8B decode of main against early, early's tests, then
# every GPU test binary of main.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
gemv_micro
for n in phases earlyph; do
  $T1 timeout 60 $V/golinear_$n bench --config $CFG --batches 1 --contexts 4096 --variants hybrid --decode-repeats 20 > /tmp/r/ph_$n.txt 2>&1
  echo "phases $n exit $? at $(el) s" >> $R; grep -E "^bench:|error" /tmp/r/ph_$n.txt >> $R
  grep -E "^phases" /tmp/r/ph_$n.txt | tail -24 >> $R
done
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1,4 main:$G early:$V/golinear_early
TEST_ARGS='--gtest_filter=-*TrainedStudent*' BIN_DIR=$V plain_tests test_mixers_cuda_early \
  test_model_cuda_early test_runtime_cuda_early
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_ops_cuda test_kernels_cuda \
  test_attention_cuda test_gated_delta_cuda test_gated_linear_cuda test_mixers_cuda \
  test_model_cuda test_runtime_cuda test_eval_cuda test_analysis_cuda test_train_cuda
echo "total $(el) s" >> $R
