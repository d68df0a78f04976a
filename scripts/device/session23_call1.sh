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
for n in phases earlyph; do decode_probe $n $V/golinear_$n "^phases" 24; done
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1,4 main:$G early:$V/golinear_early
TEST_ARGS='--gtest_filter=-*TrainedStudent*' BIN_DIR=$V plain_tests test_mixers_cuda_early \
  test_model_cuda_early test_runtime_cuda_early
gpu_tests
echo "total $(el) s" >> $R
