#!/bin/bash
# Session 23, call 5 (carry: pack.sh of main: the pipelined GEMV under __launch_bounds__(256, 4)
# and the split decode kernel with its keys and values staged in shared memory; extra.tar.xz as
# vbins/: golinear_old (37a04ca)): the 8B decode of old and main alternated (B = 1, 4), the
# whole-model table's batch-1 decode rows at 4K / 32K / 128K, compute-sanitizer racecheck and
# memcheck of the tests that run the split decode kernel (one process each, 8 at a time), then
# every GPU test binary of main.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1,4 old:$V/golinear_old main:$G
ROUNDS=2 contexts_ab old:$V/golinear_old main:$G
{
  for t in default split_window_8_d128 d128_gqa4_odd_hidden_lse sinks_only swa_only pure_replacement; do
    echo "racecheck test_mixers_cuda Recipes/GpuHybridMixerRecipes.ForwardDecodeAndEveryGradientMatchTheCpuMixer/$t"
  done
  echo "racecheck test_model_cuda GpuModel.BatchDecodeMatchesOneSequenceAtATime"
  echo "memcheck test_mixers_cuda Recipes/GpuHybridMixerRecipes.ForwardDecodeAndEveryGradientMatchTheCpuMixer/split_window_8_d128"
  echo "memcheck test_mixers_cuda Recipes/GpuHybridMixerRecipes.ForwardDecodeAndEveryGradientMatchTheCpuMixer/default"
  echo "memcheck test_model_cuda GpuModel.GreedyDecodeHybridGraph"
} | SAN_JOBS=8 SAN_TIMEOUT=200 sanitize
echo "sanitizers done at $(el) s" >> $R
gpu_tests
echo "total $(el) s" >> $R
