#!/bin/bash
# Session 14, call 7 (carry: pack.sh of main at 0b2e10e, every binary rebuilt): the whole GPU
# suite plainly (GpuTrainedStudent left out: the bundled model is not carried), the 8B transfer
# (twice), its stage profile pipelined and with the teacher on the students' stream
# (--no-pipeline: the teacher's own time per sequence, the floor under the 5-minute goal), and
# the batch-1 8B decode of both variants.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r
CFG=bench/configs/llama-3.1-8b.json
T1="taskset -c 0-7"
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests $(cd /tmp/bins && ls test_*_cuda)
transfer_ab new:$G
for mode in "" --no-pipeline; do
  $T1 timeout 100 $G bench --transfer --config $CFG --seq-len 4096 --steps 8 --profile $mode > /tmp/r/profile$mode.txt 2>&1
  echo "profile ${mode:-pipelined}:" >> $R; sed -n '/time per stage/,$p' /tmp/r/profile$mode.txt >> $R
done
$T1 timeout 120 $G bench --config $CFG --batches 1 --contexts 4096 --decode-repeats 20 > /tmp/r/decode.txt 2>&1
echo "decode exit $? at $(el) s" >> $R; grep -E "^bench:|error" /tmp/r/decode.txt >> $R
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
