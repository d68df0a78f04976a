#!/bin/bash
# Session 23, call 4 (carry: pack.sh of main: the pipelined GEMV under __launch_bounds__(256, 4)
# (55 registers: 4 blocks an SM, no shared-memory floor or carveout) and the staged split decode
# kernel (carveout as before: only where state rows sit in shared memory); extra.tar.xz as vbins/:
# gemv_micro (relinked), golinear_old (37a04ca), golinear_nostage2 (call 2's: 48-register GEMV,
# unstaged), golinear_g48 (48-register GEMV, staged: GL_EXP_LB1), golinear_unst (this GEMV,
# unstaged), golinear_maxc (staged, the decode kernel at carveout max shared), golinear_nostate
# (staged keys and values only, the state as before)): op and mixer
# tests, the GEMV microbenchmark, the 8B decode of the seven alternated, timelines.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
ops_first gemv || exit 0
plain_tests test_mixers_cuda
gemv_micro
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1,4 old:$V/golinear_old nostage2:$V/golinear_nostage2 \
  g48:$V/golinear_g48 unst:$V/golinear_unst main:$G maxc:$V/golinear_maxc nostate:$V/golinear_nostate
timeline main $G
timeline unst $V/golinear_unst
timeline nostage2 $V/golinear_nostage2
echo "total $(el) s" >> $R
