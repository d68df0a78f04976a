#!/bin/bash
# Session 20, call 1 (carry: carry2/ from pack.sh of this tree as bins/ — the GDN forward's
# `--gdn-wait-groups` option; extra.tar.xz as vbins/: the same tree built with GL_GDN_PREP4=1, the
# prepare at 4 blocks an SM (scripts/device/variant.sh p4 -DGL_GDN_PREP4=1): golinear_p4 and its
# GDN, mixer and trainer tests; golinear_p4st2, also with the state pass at 2 stages
# (-DGL_GDN_ST2=1: 146 KB, so that one prepare block fits beside each state-pass block);
# fla.tar.xz; libkernel_timeline.so and libcupti.so.13):
# the GDN tests of main (the wait-group test) and of p4, then the GDN forward of main at the
# default wait groups (one per segment), 16, 32 and 64, with 4 segments, at 8K with the persistent
# pass, and of p4 and p4st2 (three rounds alternated), fla's forward in the same call, the prepares alone
# (timeline, pipeline off) of main and p4, and the 8B attention transfer of main and p4.
# (A record: the GL_GDN_PREP4 / GL_GDN_ST2 switches are scripts/device/experiments/
# session20_prepare4_st2.patch now; main's defaults changed in 85ecf3e.)
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra fla
plain_tests test_gated_delta_cuda
BIN_DIR=$V plain_tests test_gated_delta_cuda_p4 test_mixers_cuda_p4
P='gated deltanet \(chunked\)|hybrid \(gdn.*prefill'
MIXERS_ARGS=--no-backward ROUNDS=3 mixers_ab "$P" main:$G "wg16:$G:--gdn-wait-groups 16" \
  "wg32:$G:--gdn-wait-groups 32" "wg64:$G:--gdn-wait-groups 64" \
  "s4wg64:$G:--gdn-segments 4 --gdn-wait-groups 64" \
  "awg64:$G:--gdn-persistent always --gdn-wait-groups 64" \
  p4:$V/golinear_p4 "p4wg64:$V/golinear_p4:--gdn-wait-groups 64" \
  "p4st2wg64:$V/golinear_p4st2:--gdn-wait-groups 64"
fla_anchor
GDN_MODES=seg1 gdn_timelines main $G
GDN_MODES=seg1 gdn_timelines p4 $V/golinear_p4
GDN_MODES=default gdn_timelines wg64 $G --gdn-wait-groups 64
transfer_ab main:$G p4:$V/golinear_p4
BIN_DIR=$V plain_tests test_train_cuda_p4
cp /tmp/r/mixers_*_1.txt $OUT/ 2>/dev/null
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
