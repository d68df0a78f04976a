#!/bin/bash
# Session 15, call 4 (carry: call 3's pack — the test binaries of main with the split decode
# kernel, its early position load and unrolled front-end loops; extra.tar.xz: golinear_new = that
# CLI, golinear_pf0/8/16 = the same with the GEMV's L2 prefetch before its pdl_wait set to 0, 8
# and 16 MiB over the grid instead of 4 KiB a warp): batch-1 and batch-4 8B decode of the four
# alternated (2 rounds); compute-sanitizer racecheck (unrestricted: the kernel filter fails beside
# cuBLAS) of the tests that run the hybrid decode kernel, one process each, 12 at a time, and
# memcheck of four of them.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
tar xJf carry2/extra.tar.xz -C /tmp/bins/
decode_ab 1,4 $(for b in new pf0 pf8 pf16; do echo $b:/tmp/bins/golinear_$b; done)
{
  for t in default split_window_8_d128 d128_gqa4_odd_hidden_lse sinks_only swa_only linear_rope none pure_replacement; do
    echo "racecheck test_mixers_cuda Recipes/GpuHybridMixerRecipes.ForwardDecodeAndEveryGradientMatchTheCpuMixer/$t"
  done
  echo "racecheck test_mixers_cuda GpuHybridMixer.SplitIsTheExactBranchUntilATokenLeavesTheExactSet"
  for t in HybridPrefillFillsCacheAsSteps GreedyDecodeHybridGraph BatchDecodeMatchesOneSequenceAtATime BatchDecodeFollowsMixerChanges; do
    echo "racecheck test_model_cuda GpuModel.$t"
  done
  echo "memcheck test_mixers_cuda Recipes/GpuHybridMixerRecipes.ForwardDecodeAndEveryGradientMatchTheCpuMixer/default"
  echo "memcheck test_mixers_cuda Recipes/GpuHybridMixerRecipes.ForwardDecodeAndEveryGradientMatchTheCpuMixer/split_window_8_d128"
  echo "memcheck test_model_cuda GpuModel.BatchDecodeMatchesOneSequenceAtATime"
  echo "memcheck test_model_cuda GpuModel.GreedyDecodeHybridGraph"
} | sanitize
tar cJf $OUT/r.tar.xz -C /tmp r san
echo "total $(el) s" >> $R
