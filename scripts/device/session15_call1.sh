#!/bin/bash
# Session 15, call 1 (carry: pack.sh of main with the split hybrid decode kernel and the decode
# step's chain of programmatic dependents; extra.tar.xz: golinear_old = 56f0cba, golinear_split =
# the split kernel alone; libkernel_timeline.so + libcupti.so.13): session 14's unrun check (the mixing
# kernels) and the decode paths' tests, the trainers' two-stream tests three times; batch-1 and
# batch-4 8B decode of the three binaries alternated; each one's in-graph kernel times.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
tar xJf carry2/extra.tar.xz -C /tmp/bins/
cp carry2/libkernel_timeline.so carry2/libcupti.so.13 /tmp/lib/
CFG=bench/configs/llama-3.1-8b.json
T1="taskset -c 0-7"
TEST_ARGS=--gtest_repeat=3 plain_tests test_mixers_cuda test_train_cuda
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_ops_cuda test_model_cuda test_runtime_cuda test_eval_cuda
for rep in 1 2; do
  for b in old split pdl; do
    bin=/tmp/bins/golinear_$b; [ $b = pdl ] && bin=$G
    $T1 timeout 120 $bin bench --config $CFG --batches 1,4 --contexts 4096 --decode-repeats 20 > /tmp/r/decode_${b}_$rep.txt 2>&1
    echo "decode $b rep $rep exit $? at $(el) s" >> $R; grep -E "^bench:|error" /tmp/r/decode_${b}_$rep.txt >> $R
  done
done
for b in old split pdl; do
  bin=/tmp/bins/golinear_$b; [ $b = pdl ] && bin=$G
  CUDA_INJECTION64_PATH=/tmp/lib/libkernel_timeline.so KERNEL_TIMELINE_OUT=/tmp/r/timeline_$b.txt \
    $T1 timeout 120 $bin bench --config $CFG --batches 1 --contexts 4096 --variants hybrid --decode-repeats 20 > /tmp/r/tl_decode_$b.txt 2>&1
  echo "timeline $b exit $? at $(el) s" >> $R; grep -E "^bench:|error" /tmp/r/tl_decode_$b.txt >> $R
  head -30 /tmp/r/timeline_$b.txt >> $R; tail -1 /tmp/r/timeline_$b.txt >> $R
done
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
