#!/bin/bash
# Written in session 17, run as session 18's call 1 (both patches kept: commit 827aa06; the patches
# are in scripts/device/experiments/ at commit feffbc5): the A/B of the two GDN patches
# — gdn_swizzle.patch (the prepare, state-pass and reverse-pass tiles in a dense XOR-swizzled
# shared layout; branch gdn-swizzle) and gdn_merges_tf32.patch (the prepare's inverse merges on
# mma.sync m16n8k8 in 3×tf32; branch gdn-merges-tf32); they apply in either order, both = main
# with the two applied. Carry: bins.tar.xz = main's binaries;
# extra.tar.xz as vbins/: golinear_swz, golinear_mrg, golinear_both (each build's CLI) and the
# both build's test_gated_delta_cuda, test_train_cuda, test_mixers_cuda; fla.tar.xz =
# ../shared/anchors' snapshot. Runs the both build's GDN, trainer and mixer tests, fla's forward,
# the GDN forward and fwd + bwd of main, swz, mrg and both (three rounds alternated), and Nsight
# Compute of both's prepare and state pass at 16K with the pipeline off (shared-memory wavefronts
# against session 17's 51.6 M and 56.2 M). About 5 minutes.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra fla
BIN_DIR=$V plain_tests test_gated_delta_cuda
fla_anchor
P='gated deltanet \(chunked\)|hybrid \(gdn.*prefill'
ROUNDS=3 mixers_ab "$P" main:$G swz:$V/golinear_swz mrg:$V/golinear_mrg both:$V/golinear_both
ncu_profile both "gdn_prepare_kernel|gdn_state_pass_kernel" 2 \
  $V/golinear_both bench --mixers --seq 16384 --contexts 4096 --repeats 1 --warmups 0 --no-backward --gdn-segments 1
BIN_DIR=$V plain_tests test_train_cuda test_mixers_cuda
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
