#!/bin/bash
# Session 16, call 2 (carry: bins.tar.xz = main's golinear at 70c9018 beside this tree's
# test_attention/ops/train/model_cuda; extra.tar.xz as vbins/: golinear_rev = this tree (the
# dk/dv kernel's query tiles from the last down to the diagonal, the kv group's heads side by
# side), golinear_fwd and test_attention_cuda_fwd = the same built -DGL_DKDV_ORDER=2 (heads side
# by side, from the diagonal up)): the attention tests (rev three times), the ops, trainers' and
# model tests of rev; fwd + bwd of full attention at 8K-32K for main, rev and fwd, two rounds
# alternated, SDPA before and after; the in-graph times of every attention kernel of rev.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/vt && tar xJf carry2/extra.tar.xz -C /tmp/vt
V=/tmp/vt/vbins
TEST_ARGS=--gtest_repeat=3 plain_tests test_attention_cuda
$T1 timeout 100 $V/test_attention_cuda_fwd > /tmp/r/attn_fwd.txt 2>&1
echo "test_attention_cuda_fwd exit $? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' /tmp/r/attn_fwd.txt | tr '\n' ' ')" >> $R
(unset LD_LIBRARY_PATH; $T1 timeout 90 python3 scripts/device/anchors_attention.py >> $R 2>&1); echo "anchors exit $? at $(el) s" >> $R
mixers_ab 'full attention \(ours, wgmma' main:$G rev:$V/golinear_rev fwd:$V/golinear_fwd
grep -E 'full attention \(ours, wgmma' /tmp/r/mixers_rev_1.txt /tmp/r/mixers_main_1.txt >> $R
(unset LD_LIBRARY_PATH; $T1 timeout 90 python3 scripts/device/anchors_attention.py >> $R 2>&1); echo "anchors exit $? at $(el) s" >> $R
KERNEL_TIMELINE_ALL=1 CUDA_INJECTION64_PATH=/tmp/lib/libkernel_timeline.so KERNEL_TIMELINE_OUT=/tmp/r/timeline_rev.txt \
  $T1 timeout 150 $V/golinear_rev bench --mixers --seq 8192,16384,32768 --contexts 4096 > /tmp/r/mixers_tl.txt 2>&1
echo "mixers timeline rev exit $? at $(el) s" >> $R
grep -E "flash_(forward|backward)_.*wgmma" /tmp/r/timeline_rev.txt >> $R
plain_tests test_ops_cuda
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_model_cuda test_train_cuda
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
