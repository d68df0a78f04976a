#!/bin/bash
# Session 24, call 8 (carry: call 7's): compute-sanitizer racecheck of the hybrid mixer tests
# that run the split decode kernel (D = 64 and D = 128, the gate with and without its lse row,
# the split mix), one process each, cut at 170 s.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
R2=Recipes/GpuHybridMixerRecipes.ForwardDecodeAndEveryGradientMatchTheCpuMixer
printf '%s\n' "racecheck test_mixers_cuda $R2/default" "racecheck test_mixers_cuda $R2/d128_gqa4_odd_hidden_lse" \
  "racecheck test_mixers_cuda $R2/split_window_8_d128" \
  "racecheck test_mixers_cuda GpuHybridMixer.SplitIsTheExactBranchUntilATokenLeavesTheExactSet" |
  SAN_JOBS=4 SAN_TIMEOUT=170 sanitize
echo "total $(el) s" >> $R
