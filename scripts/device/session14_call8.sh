#!/bin/bash
# Session 14, call 8 (carry: pack.sh of main at 56f0cba, the review's mixing kernels on
# hybrid.cu's row-part helpers): the GPU tests of those kernels, the mixer's repeated.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
TEST_ARGS=--gtest_repeat=3 plain_tests test_mixers_cuda
plain_tests test_ops_cuda test_train_cuda
echo "total $(el) s" >> $R
