#!/bin/bash
# Session 17, call 6 (carry: bins.tar.xz = main's binaries at bc124fd; extra.tar.xz as vbins/:
# golinear, test_gated_delta_cuda, test_mixers_cuda = this tree: the persistent forward's
# segment prepares launched as programmatic dependents of each other, so that each launch's
# blocks fill the SMs the previous one drains; fla.tar.xz): the GDN and mixer tests, fla's
# forward, the GDN forward of main and pdl (three rounds alternated), and the kernels' times of
# pdl (one run of fla only: the device budget was nearly spent).
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra fla
BIN_DIR=$V plain_tests test_gated_delta_cuda
fla_anchor
P='gated deltanet \(chunked\) +prefill|hybrid \(gdn.*prefill'
MIXERS_ARGS=--no-backward ROUNDS=3 mixers_ab "$P" main:$G pdl:$V/golinear
GDN_MODES=default gdn_timelines pdl $V/golinear
BIN_DIR=$V plain_tests test_mixers_cuda
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
