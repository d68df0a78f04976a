#!/bin/bash
# Session 19, call 2 (carry: pack.sh of main at 87cd46e as bins/; extra.tar.xz as vbins/: the
# tree at fd1e062 with the state pass on wgmma (one warpgroup per 64 value columns, one block of D / 64
# warpgroups per head by default; `--value-block 64` two blocks a head at D = 128): its CLI
# (golinear_wg) and GPU tests (_wg); fla.tar.xz): the wgmma tree's GDN, kernel, mixer, trainer and
# model tests (GpuTrainedStudent left out), then the mixer bench (with the backward) of main, wg
# and wg at value block 64, two rounds alternated, fla's GDN forward and SDPA in the same call,
# then the 8B attention transfer of main and wg.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra fla
BIN_DIR=$V TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_gated_delta_cuda_wg test_kernels_cuda_wg test_mixers_cuda_wg test_train_cuda_wg test_model_cuda_wg
P='full attention \(ours|gated deltanet \(chunked\)|sink\+window|hybrid \(gdn.*prefill'
mixers_ab "$P" main:$G wg:$V/golinear_wg "wg64:$V/golinear_wg:--value-block 64"
fla_anchor
sdpa_anchors
transfer_ab main:$G wg:$V/golinear_wg
cp /tmp/r/mixers_*_1.txt $OUT/ 2>/dev/null
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
