#!/bin/bash
# Session 19, call 2 (carry: pack.sh of main at 87cd46e; extra.tar.xz as vbins/: golinear and
# test_gated_delta_cuda built with gated_delta.cu at -DGL_GDN_WG=1 (wg1: the state pass on wgmma,
# a warpgroup per 64 value columns, two blocks a head at D = 128) and =2 (wg2: one block of two
# warpgroups a head; with checkpoints too), test_mixers_cuda and test_train_cuda of wg2; fla.tar.xz;
# kernel_timeline): wg2's GDN, mixer and trainer tests, then the GDN forward and hybrid prefill of
# main, wg1, wg2 (forward only, two rounds alternated) with fla's forward in the same call, then
# wg2's kernel timeline with the pipeline off (the state pass alone).
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra fla
BIN_DIR=$V plain_tests test_gated_delta_cuda_wg2 test_mixers_cuda_wg2 test_train_cuda_wg2
P='gated deltanet \(chunked\)|hybrid \(gdn.*prefill'
MIXERS_ARGS=--no-backward mixers_ab "$P" main:$G wg1:$V/golinear_wg1 wg2:$V/golinear_wg2
fla_anchor
GDN_MODES=seg1 gdn_timelines wg2 $V/golinear_wg2
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
