#!/bin/bash
# Session 21, call 1 (carry: pack.sh of the tree with the weight-streaming GEMV — a ring of 3
# slots of 4 KiB a warp — with the RMSNorm folded into the GEMVs that read it, the SwiGLU into
# the gate/up GEMV and the qkv split's bf16 rows into the qkv GEMV; extra.tar.xz as vbins/:
# golinear_base = 206be3a's CLI (the register GEMV), golinear_noqkv = new without the qkv fold,
# golinear_nonorm / _nosw / _plain = noqkv without the norm fold / the SwiGLU fold / either; libkernel_timeline.so, libcupti.so.13). The op tests first (a hang or failure stops the
# call), then 8B decode of the five alternated (B = 1, 4), in-graph kernel times of base and new,
# the GPU suite but test_gated_delta_cuda (no code of its changed), most important first.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
$T1 timeout 60 /tmp/bins/test_ops_cuda > /tmp/r/ops.txt 2>&1
echo "test_ops_cuda exit $? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' /tmp/r/ops.txt | tr '\n' ' ')" >> $R
grep -E "gemv|FAILED|Failure" /tmp/r/ops.txt | head -20 >> $R
grep -q "PASSED" /tmp/r/ops.txt || exit 0
for rep in 1 2; do
  for b in base:$V/golinear_base new:$G noqkv:$V/golinear_noqkv nonorm:$V/golinear_nonorm nosw:$V/golinear_nosw plain:$V/golinear_plain; do
    out=/tmp/r/decode_${b%%:*}_$rep.txt
    $T1 timeout 30 ${b#*:} bench --config $CFG --batches 1,4 --contexts 4096 --decode-repeats 20 > $out 2>&1
    echo "decode ${b%%:*} rep $rep exit $? at $(el) s" >> $R; grep -E "^bench:|error" $out >> $R
  done
done
grep -q "decode new rep 1 exit 0" $R || exit 0
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_model_cuda test_runtime_cuda \
  test_eval_cuda test_mixers_cuda test_attention_cuda
timeline new $G
timeline base $V/golinear_base
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_train_cuda test_kernels_cuda \
  test_analysis_cuda test_gated_linear_cuda
echo "total $(el) s" >> $R
