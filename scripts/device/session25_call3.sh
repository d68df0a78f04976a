#!/bin/bash
# Session 25, call 3 (carry: call 1's bins; extra.tar.xz as vbins/: golinear_ew and golinear_retN
# (the hybrid decode kernel returning at its N-th barrier after the wait: 1 conv, 2 norms, 3 scores,
# 4 stats, 5 exact output, 6 before the ticket; results wrong, only the time counts), and
# golinear_new / test_mixers_cuda_new / test_model_cuda_new (the ticket before the wait, the cache
# writes after the norms, the softmax statistics in every warp)): the new kernel's tests, then 600
# batch-1 steps of each build (the power-capped regime), alternated, two rounds; batch 1/4 of main
# and new at 20 steps.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
BIN_DIR=$V plain_tests test_mixers_cuda_new test_model_cuda_new
long_ab main:$G new:$V/golinear_new ew:$V/golinear_ew ret1:$V/golinear_ret1 ret2:$V/golinear_ret2 \
  ret3:$V/golinear_ret3 ret4:$V/golinear_ret4 ret5:$V/golinear_ret5 ret6:$V/golinear_ret6
ROUNDS=2 DECODE_TIMEOUT=40 decode_ab 1,4 main:$G new:$V/golinear_new
echo "total $(el) s" >> $R
