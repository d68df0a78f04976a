#!/bin/bash
# Session 25, call 6 (carry: pack.sh of main with the decode kernel's scores at four threads a key
# ("sc4"); extra.tar.xz as vbins/: golinear_main (62046cd), golinear_TK1 / test_mixers_cuda_TK1
# (the block's ticket an acq_rel atomic, no sequentially consistent fences) and golinear_TK2 /
# test_mixers_cuda_TK2 (that ticket taken by warp 7 right after the wait)): the TK tests, 600
# batch-1 steps of 62046cd, sc4, TK1 and TK2 alternated (two rounds), batch 1/4 at 20 steps, then
# every GPU test binary beside racecheck of the split decode tests.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
BIN_DIR=$V plain_tests test_mixers_cuda_TK1 test_mixers_cuda_TK2
long_ab base:$V/golinear_main sc4:$G TK1:$V/golinear_TK1 TK2:$V/golinear_TK2
ROUNDS=2 DECODE_TIMEOUT=40 decode_ab 1,4 base:$V/golinear_main sc4:$G TK1:$V/golinear_TK1 TK2:$V/golinear_TK2
decode_sanitize
echo "total $(el) s" >> $R
