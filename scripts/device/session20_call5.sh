#!/bin/bash
# Session 20, call 5 (carry: bins/ as call 3 (main's code at 85ecf3e); extra.tar.xz as vbins/:
# the tree with GL_GDN_WGK=1 — the prepare's step 1, K Kᵀ and Q Kᵀ, on warpgroup MMA from K and Q
# in 128-byte swizzle atoms (scripts/device/variant.sh wgk -DGL_GDN_WGK=1): golinear_wgk and its
# GDN, mixer and trainer tests; fla.tar.xz; libkernel_timeline.so and libcupti.so.13): wgk's
# tests, the GDN forward of main and wgk (six rounds alternated, forward only), the prepares
# alone (timeline, --gdn-segments 1) of both, fla's forward in the same call.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra fla
BIN_DIR=$V plain_tests test_gated_delta_cuda_wgk test_mixers_cuda_wgk
P='gated deltanet \(chunked\)|hybrid \(gdn.*prefill'
MIXERS_ARGS=--no-backward ROUNDS=6 mixers_ab "$P" main:$G wgk:$V/golinear_wgk
GDN_MODES=seg1 gdn_timelines main $G
GDN_MODES=seg1 gdn_timelines wgk $V/golinear_wgk
fla_anchor
BIN_DIR=$V plain_tests test_train_cuda_wgk
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
