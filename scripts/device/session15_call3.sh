#!/bin/bash
# Session 15, call 3 (carry: pack.sh of main with the split decode kernel, its early position load
# and its two front-end loops unrolled by 2; extra.tar.xz: golinear_split = call 1's split kernel
# alone): the decode paths' tests; compute-sanitizer racecheck, memcheck and synccheck of the
# hybrid decode kernel (its launches only: --kernel-name) over the mixer recipes and the model's
# hybrid decode tests; batch-1 and batch-4 8B decode of both binaries alternated (3 rounds); the
# in-graph kernel times of the new one.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
tar xJf carry2/extra.tar.xz -C /tmp/bins/
cp carry2/libkernel_timeline.so carry2/libcupti.so.13 /tmp/lib/
CFG=bench/configs/llama-3.1-8b.json
T1="taskset -c 0-7"
CS=/usr/local/cuda/bin/compute-sanitizer
for tool in racecheck memcheck synccheck; do
  taskset -c 8-15 timeout 240 $CS --tool $tool --kernel-name kns=hybrid_decode_kernel --error-exitcode 9 \
    /tmp/bins/test_mixers_cuda --gtest_filter='Recipes/*:GpuHybridMixer.Split*' > /tmp/r/san_mixers_$tool.txt 2>&1 &
done
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_mixers_cuda test_model_cuda test_runtime_cuda test_eval_cuda
for rep in 1 2 3; do
  for b in split new; do
    bin=/tmp/bins/golinear_$b; [ $b = new ] && bin=$G
    $T1 timeout 120 $bin bench --config $CFG --batches 1,4 --contexts 4096 --decode-repeats 20 > /tmp/r/decode_${b}_$rep.txt 2>&1
    echo "decode $b rep $rep exit $? at $(el) s" >> $R; grep -E "^bench:|error" /tmp/r/decode_${b}_$rep.txt >> $R
  done
done
CUDA_INJECTION64_PATH=/tmp/lib/libkernel_timeline.so KERNEL_TIMELINE_OUT=/tmp/r/timeline_new.txt \
  $T1 timeout 120 $G bench --config $CFG --batches 1 --contexts 4096 --variants hybrid --decode-repeats 20 > /tmp/r/tl_decode_new.txt 2>&1
echo "timeline new exit $? at $(el) s" >> $R; cat /tmp/r/timeline_new.txt >> $R
wait
for tool in racecheck memcheck synccheck; do
  echo "sanitizer $tool (mixers): $(grep -E '^\[  (PASSED|FAILED)|SUMMARY' /tmp/r/san_mixers_$tool.txt | tr '\n' ' ')" >> $R
done
taskset -c 8-15 timeout 200 $CS --tool racecheck --kernel-name kns=hybrid_decode_kernel --error-exitcode 9 \
  /tmp/bins/test_model_cuda --gtest_filter='*Hybrid*:*BatchDecode*' > /tmp/r/san_model_racecheck.txt 2>&1
echo "sanitizer racecheck (model) exit $?: $(grep -E '^\[  (PASSED|FAILED)|SUMMARY' /tmp/r/san_model_racecheck.txt | tr '\n' ' ')" >> $R
tar cJf $OUT/r.tar.xz -C /tmp/r .
echo "total $(el) s" >> $R
