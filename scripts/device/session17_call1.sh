#!/bin/bash
# Session 17, call 1 (carry: bins.tar.xz = main's binaries at bc124fd; extra.tar.xz as vbins/:
# golinear = this tree (the split GDN forward: the persistent state pass writes each chunk's Sᵀ
# and ũ, gdn_output_kernel computes the outputs in parallel, chunk groups of 8 signalled),
# golinear_split4 / _split16 = the same built -DGL_GDN_SPLIT=4 / 16, and this tree's
# test_gated_delta_cuda, test_mixers_cuda; fla.tar.xz = ../shared/anchors' snapshot):
# the GDN tests of the split, the GDN forward of main and the splits (three rounds alternated)
# between two runs of fla's forward, the split's kernel times, the mixer tests of the split, then
# Nsight Compute of the attention dk/dv kernel at 8K and 16K (main).
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra fla
BIN_DIR=$V plain_tests test_gated_delta_cuda
fla_anchor
P='gated deltanet \(chunked\) +prefill|hybrid \(gdn.*prefill'
mixers_ab "$P" main:$G split8:$V/golinear split4:$V/golinear_split4 split16:$V/golinear_split16
FIRST_ROUND=3 ROUNDS=3 mixers_ab "$P" main:$G split8:$V/golinear
fla_anchor
mixers_timeline split8 $V/golinear
BIN_DIR=$V plain_tests test_mixers_cuda
for T in 8192 16384; do
  NCU_SECTIONS=${NCU_FULL% --section SourceCounters} ncu_profile dkdv_$T flash_backward_dkdv_wgmma 1 \
    $G bench --mixers --seq $T --contexts 4096 --repeats 1 --warmups 0
done
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
