#!/bin/bash
# Session 18, call 6: compute-sanitizer racecheck of the GDN kernels as landed (827aa06: swizzled
# tiles, tf32 merges with __syncwarp between a warp's two level-1 products), which every
# test_gated_delta_cuda entry of docs/results/racecheck_passed.txt had passed with the padded
# layout: each test again (PASSED=/dev/null), one process each, 12 at a time, the long persistent
# pair left out (session 13: under racecheck their prepares outlast the pass's watchdog), then
# test_mixers_cuda's tests as time allows. Carry: extra.tar.xz as vbins/ = this tree's
# test_gated_delta_cuda and test_mixers_cuda (bins.tar.xz not carried).
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
export T0 R
BINS=$V PASSED=/dev/null SKIP='*PersistentLong*:*Timing*' JOBS=12 \
  scripts/device/racecheck_resume.sh 210 test_gated_delta_cuda test_mixers_cuda
echo "total $(el) s" >> $R
