#!/bin/bash
# Session 18, call 2: main after the two GDN patches landed (as one cleaned-up commit: the padded
# layout deleted, the tiles' shared-memory footprint dense) — its GDN, trainer and mixer tests —
# then the GDN forward of the previous main ($G), the new main (new), new with 16 and 32 segments
# (the prepare got cheaper, so the pipeline's best segment count may have moved), and new with a
# 2-stage state pass (st2: 146 instead of 213 KB of shared memory, so one prepare block fits
# beside each state-pass block), three rounds alternated; fla's forward in the same call; the
# kernel timelines of new and st2 (prepares alone and beside the pass). Carry: extra.tar.xz as
# vbins/ = golinear_new, golinear_st2, new's test_gated_delta_cuda, test_train_cuda,
# test_mixers_cuda; fla.tar.xz; libkernel_timeline.so, libcupti.so.13.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra fla
BIN_DIR=$V plain_tests test_gated_delta_cuda test_mixers_cuda
P='gated deltanet \(chunked\)|hybrid \(gdn.*prefill'
MIXERS_ARGS=--no-backward ROUNDS=3 mixers_ab "$P" old:$G new:$V/golinear_new \
  s16:$V/golinear_new:"--gdn-segments 16" s32:$V/golinear_new:"--gdn-segments 32" st2:$V/golinear_st2
fla_anchor
gdn_timelines new $V/golinear_new
gdn_timelines st2 $V/golinear_st2
BIN_DIR=$V plain_tests test_train_cuda
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
