#!/bin/bash
# Session 15, call 6 (carry: pack.sh of the final main: the split decode kernel for at most half
# the SMs' worth of heads, the decode chain of programmatic dependents without the GEMV's L2
# prefetch; extra.tar.xz: golinear_base = call 5's base, which split at 4 sequences too): the
# whole GPU suite (GpuTrainedStudent left out: the bundled model is not carried), the trainers'
# two-stream tests twice more; 8B decode at 1, 2, 4 sequences, final and base alternated.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
tar xJf carry2/extra.tar.xz -C /tmp/bins/
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests $(cd /tmp/bins && ls test_*_cuda)
TEST_ARGS=--gtest_repeat=2 plain_tests test_train_cuda
decode_ab 1,2,4 final:$G base:/tmp/bins/golinear_base
echo "total $(el) s" >> $R
