#!/bin/bash
# Session 9, call 8 (after the review's mends: CudaEvent owners for the snapshot copies' events,
# the kernels' shared pack_bf16/kLog2e — PTX identical): the GPU tests where two streams meet
# three times over (the slots' snapshots on the pool's stream; the model's caches waiting on
# them), then the attention, ops and batched-generation tests once, then training three times
# (the pipelined teacher on its own stream) while time lasts.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
run() {  # label, timeout, binary, args...
  local label=$1 t=$2; shift 2
  timeout $t "$@" > /tmp/t.txt 2>&1; echo "$label exit $? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' /tmp/t.txt | tr '\n' ' ')" >> $R
  grep -E "^\[  FAILED|Failure" /tmp/t.txt | head -5 >> $R
}
run "runtime x3" 30 /tmp/bins/test_runtime_cuda --gtest_repeat=3
run "model x3 (without GpuTrainedStudent: the bundled model stays here)" 60 /tmp/bins/test_model_cuda --gtest_repeat=3 --gtest_filter=-GpuTrainedStudent.*
run "attention" 20 /tmp/bins/test_attention_cuda
run "ops" 10 /tmp/bins/test_ops_cuda
run "eval GpuBatchGenerate" 20 /tmp/bins/test_eval_cuda --gtest_filter=GpuBatchGenerate.*
run "train x3" 80 /tmp/bins/test_train_cuda --gtest_repeat=3
echo "total $(el) s" >> $R
