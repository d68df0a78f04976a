#!/bin/bash
# Session 19, call 1 (carry: pack.sh of main at 87cd46e — code of c41244c): what session 18 left
# unrun — the whole GPU suite on the swizzled GDN tiles and the shared mma.sync header
# (GpuTrainedStudent left out: the bundled model is not carried), then the GDN, trainer and mixer
# binaries twice more (the two-stream pipeline and the persistent forward under repetition).
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests $(cd /tmp/bins && ls test_*_cuda)
TEST_ARGS=--gtest_repeat=2 plain_tests test_gated_delta_cuda test_mixers_cuda test_train_cuda
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
