#!/bin/bash
# Session 20, call 6 (carry: as call 3, bins/ = the code of 85ecf3e, whose test binaries the later
# commits do not change): the GDN and mixer test binaries three times over (--gtest_repeat=3:
# the persistent pass's two streams under repetition).
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
TEST_ARGS='--gtest_repeat=3' plain_tests test_gated_delta_cuda test_mixers_cuda
echo "total $(el) s" >> $R
