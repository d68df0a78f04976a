#!/bin/bash
# Session 15, call 1 (carry: pack.sh of main with the split hybrid decode kernel and the decode
# step's chain of programmatic dependents; extra.tar.xz: golinear_old = 56f0cba, golinear_split =
# the split kernel alone; libkernel_timeline.so + libcupti.so.13): session 14's unrun check (the mixing
# kernels) and the decode paths' tests, the trainers' two-stream tests three times; batch-1 and
# batch-4 8B decode of the three binaries alternated; each one's in-graph kernel times.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
tar xJf carry2/extra.tar.xz -C /tmp/bins/
TEST_ARGS=--gtest_repeat=3 plain_tests test_mixers_cuda test_train_cuda
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_ops_cuda test_model_cuda test_runtime_cuda test_eval_cuda
decode_ab 1,4 old:/tmp/bins/golinear_old split:/tmp/bins/golinear_split pdl:$G
timeline old /tmp/bins/golinear_old
timeline split /tmp/bins/golinear_split
timeline pdl $G
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
