#!/bin/bash
# Session 14, call 2 (carry: pack.sh of main with the fixes below; carry2/base.tar.xz = call 1's
# golinear as bins/golinear_base; carry2/cupti.tar.xz = libkernel_names.so (kernel_names.cpp)
# and libcupti.so.13 of this machine).
#  1 the GPU tests the changes touch, plainly: test_model_cuda (BatchDecodeFollowsMixerChanges:
#    the stale batch tables behind call 1's illegal address), test_gated_delta_cuda (the forward
#    for the backward), test_mixers_cuda and test_train_cuda (the trainer's forward keeps it);
#  2 call 1's failing command: batch-1 8B decode, both variants;
#  3 the 8B transfer, base (call 1's binary) against new, alternated twice;
#  4 the kernels each test launches (CUPTI injection): the five tests racecheck could not finish
#    in 865 s against every test that passed racecheck (the five binaries' passed list, the other
#    six binaries whole), for RELIABILITY.md.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r /tmp/cupti
tar xJf carry2/base.tar.xz -C /tmp
tar xJf carry2/cupti.tar.xz -C /tmp/cupti
T1="taskset -c 0-7"
plain_tests test_model_cuda test_gated_delta_cuda test_mixers_cuda test_train_cuda
grep -E "batch decode|BatchDecodeFollows" /tmp/r/test_model_cuda.txt >> $R
grep -E "o of the forward for the backward" /tmp/r/test_gated_delta_cuda.txt | head -4 >> $R
CFG=bench/configs/llama-3.1-8b.json
$T1 timeout 120 $G bench --config $CFG --batches 1 --contexts 4096 --decode-repeats 20 > /tmp/r/decode.txt 2>&1
echo "decode exit $? at $(el) s" >> $R; grep -E "^bench:|error" /tmp/r/decode.txt >> $R
transfer_ab base:/tmp/bins/golinear_base new:$G
$T1 timeout 100 $G bench --transfer --config $CFG --seq-len 4096 --steps 8 --profile > /tmp/r/transfer_profile.txt 2>&1
sed -n '/time per stage/,$p' /tmp/r/transfer_profile.txt >> $R
# 4 kernel lists, every binary at once (plain runs; the GPU is shared, nothing is timed)
names() {  # NAME BINARY FILTER
  CUDA_INJECTION64_PATH=/tmp/cupti/libkernel_names.so KERNEL_NAMES_OUT=/tmp/r/kn_$1.txt \
    LD_LIBRARY_PATH=/tmp/cupti:$LD_LIBRARY_PATH timeout 200 /tmp/bins/$2 --gtest_filter="$3" > /tmp/r/kn_$1.log 2>&1
  echo "names $1 exit $? at $(el) s: $(tail -1 /tmp/r/kn_$1.txt 2>/dev/null) $(grep -E '^\[  (PASSED|FAILED)' /tmp/r/kn_$1.log | tr '\n' ' ')" >> $R
}
passed() { grep "^$1 " docs/results/racecheck_passed.txt | cut -d' ' -f2 | paste -sd: ; }
names u_mixers test_mixers_cuda 'Recipes/GpuHybridMixerRecipes.ForwardDecodeAndEveryGradientMatchTheCpuMixer/window_1000' &
names u_model test_model_cuda 'GpuModel.LoraLogitsMatchTheCpu' &
names u_train test_train_cuda 'GpuAttentionTransfer.EveryGdnRecipeMatchesTheCpuAndLearns:GpuDistillation.StepsLowerTheKlAndTheStateResumesOnTheCpu:GpuDistillation.LoraStepsLowerTheKlAndResumeOnTheCpu' &
for b in test_mixers_cuda test_model_cuda test_train_cuda test_eval_cuda test_gated_delta_cuda; do
  names p_$b $b "$(passed $b)" &
done
for b in test_kernels_cuda test_ops_cuda test_gated_linear_cuda test_analysis_cuda test_attention_cuda test_runtime_cuda; do
  names p_$b $b '*' &
done
wait
cat /tmp/r/kn_p_*.txt | grep -v '^#' | LC_ALL=C sort -u > /tmp/r/kn_passed.txt
cat /tmp/r/kn_u_*.txt | grep -v '^#' | LC_ALL=C sort -u > /tmp/r/kn_unfinished.txt
echo "kernels: $(wc -l < /tmp/r/kn_passed.txt) launched by racecheck-passed tests, $(wc -l < /tmp/r/kn_unfinished.txt) by the five unfinished; not in the passed set:" >> $R
LC_ALL=C comm -13 /tmp/r/kn_passed.txt /tmp/r/kn_unfinished.txt >> $R
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
