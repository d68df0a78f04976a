#!/bin/bash
# Session 23, call 7 (carry: pack.sh of main with the GEMV's first chunk before its pdl_wait;
# extra.tar.xz as vbins/: golinear_old (37a04ca, the session's start)): the 8B decode of old and
# main alternated (B = 1, 4), the whole-model table's batch-1 decode rows at 4K / 32K / 128K, then
# every GPU test binary of main.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1,4 old:$V/golinear_old main:$G
contexts_ab old:$V/golinear_old main:$G
gpu_tests
echo "total $(el) s" >> $R
