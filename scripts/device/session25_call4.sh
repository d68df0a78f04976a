#!/bin/bash
# Session 25, call 4 (carry: call 1's bins; extra.tar.xz as vbins/: golinear_TWICE (the decode
# kernel's scores phase run twice, the second time from a warm instruction cache), golinear_BARS
# (four barriers more after the scores), golinear_DRY / test_mixers_cuda_DRY / test_model_cuda_DRY
# (split blocks run the whole post-wait code once before their wait, stores off, then for real)):
# the DRY tests, then 600 batch-1 steps of each build alternated, two rounds; batch 1/4 of main and
# DRY at 20 steps.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
BIN_DIR=$V TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_mixers_cuda_DRY test_model_cuda_DRY
long_ab main:$G TWICE:$V/golinear_TWICE BARS:$V/golinear_BARS DRY:$V/golinear_DRY
ROUNDS=2 DECODE_TIMEOUT=40 decode_ab 1,4 main:$G DRY:$V/golinear_DRY
echo "total $(el) s" >> $R
