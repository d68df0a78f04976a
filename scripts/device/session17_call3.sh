#!/bin/bash
# Session 17, call 3 (carry: bins.tar.xz = main's binaries at bc124fd; extra.tar.xz as vbins/:
# golinear = this tree (the prepare kernel's step 1 as template units over balanced warps, P
# computed beside the diagonal inverse, e^x by ex2.approx), golinear_prepexpf = the same with
# expf (-DGL_PREP_EXPF), this tree's test_gated_delta/mixers/train_cuda; fla.tar.xz): the tests
# of the new prepare, the GDN forward of main / prep / prepexpf (three rounds alternated) between
# two runs of fla's forward, the kernels' times with the pipeline off and on, and Nsight Compute
# of the new prepare at 16K (pipeline off).
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra fla
BIN_DIR=$V plain_tests test_gated_delta_cuda
fla_anchor
P='gated deltanet \(chunked\) +prefill|hybrid \(gdn.*prefill'
ROUNDS=3 mixers_ab "$P" main:$G prep:$V/golinear prepexpf:$V/golinear_prepexpf
fla_anchor
gdn_timelines prep $V/golinear
BIN_DIR=$V plain_tests test_mixers_cuda test_train_cuda
ncu_profile prep gdn_prepare_kernel 1 \
  $V/golinear bench --mixers --seq 16384 --contexts 4096 --repeats 1 --warmups 0 --no-backward --gdn-segments 1
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
