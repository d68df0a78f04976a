#!/bin/bash
# Session 18, call 3: the GDN prepare per (chunk, NH heads of one kv group) — K and V loaded once
# for the NH heads, K Kᵀ computed once — at NH = 1 (this tree's default: the restructured kernel,
# the same work as before), 2 and 4 (-DGL_GDN_PREPARE_HEADS), against HEAD's binary (head: main
# before the change). Tests of each build (nh4 also the mixers and the trainer), then the mixer
# bench's GDN and hybrid rows with the backward (three rounds alternated), fla's forward in the
# same call, and the kernel timelines of nh1 and nh4. Carry: extra.tar.xz as vbins/ =
# golinear_head, golinear_nh1, golinear_nh2, golinear_nh4, test_gated_delta_cuda_{nh1,nh2,nh4},
# test_mixers_cuda_nh4, test_train_cuda_nh4; fla.tar.xz; libkernel_timeline.so, libcupti.so.13.
cd "$(dirname "$0")/../.."  # (bins.tar.xz not carried: every binary here is in vbins/)
source scripts/device/setup.sh
unpack_extra fla
BIN_DIR=$V plain_tests test_gated_delta_cuda_nh4 test_gated_delta_cuda_nh2 test_gated_delta_cuda_nh1 test_mixers_cuda_nh4
P='gated deltanet \(chunked\)|hybrid \(gdn.*prefill'
ROUNDS=3 mixers_ab "$P" head:$V/golinear_head nh1:$V/golinear_nh1 nh2:$V/golinear_nh2 nh4:$V/golinear_nh4
fla_anchor
gdn_timelines nh1 $V/golinear_nh1
gdn_timelines nh4 $V/golinear_nh4
BIN_DIR=$V plain_tests test_train_cuda_nh4
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
