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
BIN_DIR=$V plain_tests test_attention_cuda_fwd
sdpa_anchors
mixers_ab 'full attention \(ours, wgmma' main:$G rev:$V/golinear_rev fwd:$V/golinear_fwd
grep -E 'full attention \(ours, wgmma' /tmp/r/mixers_rev_1.txt /tmp/r/mixers_main_1.txt >> $R
sdpa_anchors
mixers_timeline rev $V/golinear_rev
plain_tests test_ops_cuda
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_model_cuda test_train_cuda
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
