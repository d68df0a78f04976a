#!/bin/bash
# Session 24, call 4 (carry: pack.sh of the split decode kernel with its state in shared memory
# and the leaving token's update before the wait; extra.tar.xz as vbins/: golinear_base
# (e47e078), golinear_pdl (call 1's build), golinear_phpre (this build with
# session24_decode_phases.patch)): the hybrid decode tests first (stop if they fail), the 8B
# decode of base, pdl and pre alternated (B = 1, 4), the phase stamps, the whole-model batch-1
# rows, then every GPU test binary.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
TEST_ARGS='--gtest_filter=*Hybrid*:*Decode*' plain_tests test_mixers_cuda || exit 0
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1,4 base:$V/golinear_base pdl:$V/golinear_pdl pre:$G
decode_probe phases $V/golinear_phpre "^phases" 16
contexts_ab base:$V/golinear_base pre:$G
gpu_tests
echo "total $(el) s" >> $R
