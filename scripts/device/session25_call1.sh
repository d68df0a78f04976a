#!/bin/bash
# Session 25, call 1 (carry: pack.sh of 62046cd; extra.tar.xz as vbins/: golinear_unsplit (the
# hybrid decode kernel unsplit at batch 1: 32 blocks), golinear_ocap396 / golinear_ocap256 (the o
# product's GEMV grid held to 396 / 256 blocks)): the hybrid decode tests first (stop if they
# fail), the batch-1/4 8B decode of main and the variants alternated, then every GPU test binary
# beside racecheck of the split decode tests (session 24 call 8's list and the new D = 128 split
# recipe).
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
TEST_ARGS='--gtest_filter=*Hybrid*:*Decode*' plain_tests test_mixers_cuda || exit 0
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1,4 main:$G unsplit:$V/golinear_unsplit ocap396:$V/golinear_ocap396 ocap256:$V/golinear_ocap256
gpu_tests &
R2=Recipes/GpuHybridMixerRecipes.ForwardDecodeAndEveryGradientMatchTheCpuMixer
printf '%s\n' "racecheck test_mixers_cuda $R2/default" "racecheck test_mixers_cuda $R2/d128_gqa4_lse_split" \
  "racecheck test_mixers_cuda $R2/split_window_8_d128" "racecheck test_mixers_cuda $R2/d128_gqa4_odd_hidden_lse" \
  "racecheck test_mixers_cuda GpuHybridMixer.SplitIsTheExactBranchUntilATokenLeavesTheExactSet" |
  SAN_JOBS=5 SAN_TIMEOUT=170 sanitize
wait
echo "total $(el) s" >> $R
