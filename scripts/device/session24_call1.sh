#!/bin/bash
# Session 24, call 1 (carry: pack.sh of the hybrid decode kernel launched dependent, its front
# end before the wait; extra.tar.xz as vbins/: golinear_base (e47e078, the session's start)): the
# hybrid decode tests first (stop if they fail), the 8B decode of base and new alternated (B = 1,
# 4), both batch-1 timelines, the whole-model batch-1 rows, then every GPU test binary.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
TEST_ARGS='--gtest_filter=*Hybrid*:*Decode*' plain_tests test_mixers_cuda || exit 0
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1,4 base:$V/golinear_base new:$G
timeline base $V/golinear_base
timeline new $G
contexts_ab base:$V/golinear_base new:$G
gpu_tests
echo "total $(el) s" >> $R
