#!/bin/bash
# Session 15, call 6 (carry: pack.sh of the final main: the split decode kernel for at most half
# the SMs' worth of heads, the decode chain of programmatic dependents without the GEMV's L2
# prefetch; extra.tar.xz: golinear_base = call 5's base, which split at 4 sequences too): the
# whole GPU suite (GpuTrainedStudent left out: the bundled model is not carried), the trainers'
# two-stream tests twice more; 8B decode at 1, 2, 4 sequences, final and base alternated.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r
tar xJf carry2/extra.tar.xz -C /tmp/bins/
CFG=bench/configs/llama-3.1-8b.json
T1="taskset -c 0-7"
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests $(cd /tmp/bins && ls test_*_cuda)
TEST_ARGS=--gtest_repeat=2 plain_tests test_train_cuda
for rep in 1 2; do
  for b in final base; do
    bin=/tmp/bins/golinear_$b; [ $b = final ] && bin=$G
    $T1 timeout 120 $bin bench --config $CFG --batches 1,2,4 --contexts 4096 --decode-repeats 20 > /tmp/r/decode_${b}_$rep.txt 2>&1
    echo "decode $b rep $rep exit $? at $(el) s" >> $R; grep -E "^bench:|error" /tmp/r/decode_${b}_$rep.txt >> $R
  done
done
echo "total $(el) s" >> $R
