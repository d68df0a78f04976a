#!/bin/bash
# Session 24, call 3 (carry: libs, fixtures, extra.tar.xz as vbins/: golinear_base (e47e078),
# golinear_new (call 1's build), and variants of it: st (the split decode kernel's state columns
# cp.async'd into shared memory before its wait), early (RoPE's sincos before the wait, the
# token's cache rows written right after the norms instead of at the end), stearly (both; with
# its test_mixers_cuda and test_model_cuda), g1 / g3 (each GEMV asks its next 1 / 3 weight chunks
# into L2 before its wait)): the variant's tests, then the 8B decode of all, two rounds alternated.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
BIN_DIR=$V plain_tests test_mixers_cuda_stearly
TEST_ARGS='--gtest_filter=-*TrainedStudent*' BIN_DIR=$V plain_tests test_model_cuda_stearly
ROUNDS=2 DECODE_TIMEOUT=40 decode_ab 1,4 base:$V/golinear_base new:$V/golinear_new st:$V/golinear_st \
  early:$V/golinear_early stearly:$V/golinear_stearly g1:$V/golinear_g1 g3:$V/golinear_g3
echo "total $(el) s" >> $R
