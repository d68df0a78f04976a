#!/bin/bash
# Session 17, call 4 (carry: bins.tar.xz = main's binaries at bc124fd; extra.tar.xz as vbins/:
# golinear and test_gated_delta_cuda = this tree (the persistent state pass also at value block
# 128: one block of eight warps per head, 32 SMs instead of 64, so the segments' prepares get
# 100 SMs); fla.tar.xz): the GDN tests, the GDN forward of main (value block 64) and of this
# tree at 64 and 128 (three rounds alternated) between two runs of fla's forward, and the kernels'
# times at 128 with the pipeline off (the chain alone) and on.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra fla
BIN_DIR=$V plain_tests test_gated_delta_cuda
fla_anchor
P='gated deltanet \(chunked\) +prefill'
MIXERS_ARGS=--no-backward ROUNDS=3 mixers_ab "$P" "main:$G:--value-block 64" \
  "vb64:$V/golinear:--value-block 64" "vb128:$V/golinear:--value-block 128"
fla_anchor
gdn_timelines vb128 $V/golinear --value-block 128
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
