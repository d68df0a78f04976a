#!/bin/bash
# Session 24, call 4 (carry: pack.sh of the split decode kernel with its state in shared memory
# and the leaving token's update before the wait; extra.tar.xz as vbins/: golinear_base
# (e47e078), golinear_pdl (call 1's build), golinear_phpre (this build with
# session24_decode_phases.patch)): the hybrid decode tests first (stop if they fail), the 8B
# decode of base, pdl and pre alternated (B = 1, 4), the phase stamps, the whole-model batch-1
# rows, then every GPU test binary.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
TEST_ARGS='--gtest_filter=*Hybrid*:*Decode*' plain_tests test_mixers_cuda
grep -q "PASSED" /tmp/r/test_mixers_cuda.txt && ! grep -q "FAILED" /tmp/r/test_mixers_cuda.txt || exit 0
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1,4 base:$V/golinear_base pdl:$V/golinear_pdl pre:$G
$T1 timeout 60 $V/golinear_phpre bench --config $CFG --batches 1 --contexts 4096 --variants hybrid \
  --decode-repeats 20 > /tmp/r/phases.txt 2>&1
echo "phases exit $? at $(el) s" >> $R; grep -E "^bench:|^phases" /tmp/r/phases.txt | head -16 >> $R
contexts_ab base:$V/golinear_base pre:$G
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_ops_cuda test_kernels_cuda \
  test_attention_cuda test_gated_delta_cuda test_gated_linear_cuda test_mixers_cuda \
  test_model_cuda test_runtime_cuda test_eval_cuda test_analysis_cuda test_train_cuda
echo "total $(el) s" >> $R
