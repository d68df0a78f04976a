#!/bin/bash
# Session 25, call 7 (carry: pack.sh of main with the softmax statistics folded into the scores
# phase ("st": each warp's (max, sum) combined by shuffles, the warps' after the barrier) on top
# of the four-threads-a-key scores; extra.tar.xz as vbins/: golinear_main (62046cd) and
# golinear_sc4 (call 6's build)): 600 batch-1 steps of the three alternated (two rounds), batch
# 1/4 at 20 steps, the whole-model batch-1 rows of 62046cd and main, then every GPU test binary
# beside racecheck and memcheck of the hybrid decode tests.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
TEST_ARGS='--gtest_filter=*Hybrid*:*Decode*' plain_tests test_mixers_cuda || exit 0
long_ab base:$V/golinear_main sc4:$V/golinear_sc4 st:$G
ROUNDS=2 DECODE_TIMEOUT=40 decode_ab 1,4 base:$V/golinear_main sc4:$V/golinear_sc4 st:$G
contexts_ab base:$V/golinear_main st:$G
decode_sanitize
echo "total $(el) s" >> $R
