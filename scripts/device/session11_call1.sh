#!/bin/bash
# Session 11, call 1: the one-kernel attention backward (dQ added in the dK/dV kernel, in key-block
# order) and the GPU trainers' non-finite gradient stop: the changed binaries' tests first, then
# the attention rows of the new and the previous binary (carry2/base.tar.xz) with SDPA in the same
# call, then the other GPU test binaries. Outputs but results.txt in $OUT/r.tar.xz.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r /tmp/base && tar xJf carry2/base.tar.xz -C /tmp/base; B=/tmp/base/base/golinear
T1="taskset -c 0-7"
run_test() {  # binary [gtest args]: its tail in tests.txt, its verdict in results.txt
  local t=$1; shift
  echo "== $t $*" >> /tmp/r/tests.txt; $T1 timeout 150 /tmp/bins/$t "$@" >> /tmp/r/tests.txt 2>&1
  echo "$t $* exit $? at $(el) s" >> $R
}
run_test test_attention_cuda --gtest_repeat=3
run_test test_train_cuda --gtest_filter='*NonFinite*:*Optimizer*'
grep -E "^\[  FAILED|^\[  PASSED|backward not deterministic" /tmp/r/tests.txt | sort | uniq -c | head -20 >> $R
for b in "new:$G" "base:$B"; do
  $T1 timeout 100 ${b#*:} bench --mixers --seq 8192,16384,32768 --contexts 4096 > /tmp/r/mixers_${b%%:*}.txt 2>&1
  echo "mixers ${b%%:*} exit $? at $(el) s" >> $R
  grep -E 'full attention \(ours, wgmma' /tmp/r/mixers_${b%%:*}.txt >> $R
done
(unset LD_LIBRARY_PATH; $T1 timeout 90 python3 scripts/device/anchors_attention.py >> $R 2>&1); echo "anchors exit $? at $(el) s" >> $R
for t in test_train_cuda test_model_cuda test_kernels_cuda test_ops_cuda test_mixers_cuda test_gated_delta_cuda \
         test_gated_linear_cuda test_analysis_cuda test_runtime_cuda test_eval_cuda; do
  [ $(el) -gt 520 ] && { echo "$t skipped (time)" >> $R; continue; }
  run_test $t
done
grep -E "^\[  FAILED|^\[  PASSED" /tmp/r/tests.txt | sort | uniq -c | head -30 >> $R
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
