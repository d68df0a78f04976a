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
CS=/usr/local/cuda/bin/compute-sanitizer
for tool in racecheck memcheck synccheck; do
  taskset -c 8-15 timeout 240 $CS --tool $tool --kernel-name kns=hybrid_decode_kernel --error-exitcode 9 \
    /tmp/bins/test_mixers_cuda --gtest_filter='Recipes/*:GpuHybridMixer.Split*' > /tmp/r/san_mixers_$tool.txt 2>&1 &
done
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_mixers_cuda test_model_cuda test_runtime_cuda test_eval_cuda
ROUNDS=3 decode_ab 1,4 split:/tmp/bins/golinear_split new:$G
timeline new $G
wait
for tool in racecheck memcheck synccheck; do
  echo "sanitizer $tool (mixers): $(grep -E '^\[  (PASSED|FAILED)|SUMMARY' /tmp/r/san_mixers_$tool.txt | tr '\n' ' ')" >> $R
done
taskset -c 8-15 timeout 200 $CS --tool racecheck --kernel-name kns=hybrid_decode_kernel --error-exitcode 9 \
  /tmp/bins/test_model_cuda --gtest_filter='*Hybrid*:*BatchDecode*' > /tmp/r/san_model_racecheck.txt 2>&1
echo "sanitizer racecheck (model) exit $?: $(grep -E '^\[  (PASSED|FAILED)|SUMMARY' /tmp/r/san_model_racecheck.txt | tr '\n' ' ')" >> $R
tar cJf $OUT/r.tar.xz -C /tmp/r .
echo "total $(el) s" >> $R
