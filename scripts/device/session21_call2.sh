#!/bin/bash
# Session 21, call 2 (carry: pack.sh of the tree with the register GEMV of main plus the gate/up
# GEMV with SwiGLU folded in, gemm_nt_swiglu; extra.tar.xz as vbins/: golinear_base = 206be3a's
# CLI): the op tests first (a failure stops the call), 8B decode of base and new alternated
# (B = 1, 4), then the decode-path GPU tests.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
$T1 timeout 60 /tmp/bins/test_ops_cuda > /tmp/r/ops.txt 2>&1
echo "test_ops_cuda exit $? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' /tmp/r/ops.txt | tr '\n' ' ')" >> $R
grep -E "gemv|FAILED|Failure" /tmp/r/ops.txt | head -24 >> $R
grep -q "PASSED" /tmp/r/ops.txt || exit 0
for rep in 1 2 3; do
  for b in base:$V/golinear_base new:$G; do
    out=/tmp/r/decode_${b%%:*}_$rep.txt
    $T1 timeout 30 ${b#*:} bench --config $CFG --batches 1,4 --contexts 4096 --decode-repeats 20 > $out 2>&1
    echo "decode ${b%%:*} rep $rep exit $? at $(el) s" >> $R; grep -E "^bench:|error" $out >> $R
  done
done
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_model_cuda test_runtime_cuda \
  test_eval_cuda test_mixers_cuda
echo "total $(el) s" >> $R
