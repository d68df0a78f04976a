#!/bin/bash
# Session 22, call 4 (carry: pack.sh of the tree where every decode step — gpu_decode too — goes
# through gpu_decode_batch's captured graphs, keyed for softmax layers by the key split;
# extra.tar.xz as vbins/: golinear_base = 206be3a's CLI): the decode-path GPU tests (with the new
# SoftmaxDecodeGraphFollowsTheKeySplit), 8B decode of base and new alternated (B = 1, 4), then
# the whole-model table's batch-1 decode rows at 4K / 32K / 128K (no prefill: random caches).
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_model_cuda test_runtime_cuda \
  test_eval_cuda
grep -E "key split|FAILED|Failure" /tmp/r/test_model_cuda.txt | head -20 >> $R
ROUNDS=2 DECODE_TIMEOUT=40 decode_ab 1,4 base:$V/golinear_base new:$G
for rep in 1 2; do
  for b in base:$V/golinear_base new:$G; do
    $T1 timeout 90 ${b#*:} bench --config $CFG --contexts 4096,32768,131072 --prefill-max 0 \
      --decode-repeats 20 > /tmp/r/ctx_${b%%:*}_$rep.txt 2>&1
    echo "contexts ${b%%:*} rep $rep exit $? at $(el) s" >> $R
    grep -E "^bench:|error" /tmp/r/ctx_${b%%:*}_$rep.txt >> $R
  done
done
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_mixers_cuda
echo "total $(el) s" >> $R
