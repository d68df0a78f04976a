#!/bin/bash
# Session 24, call 7 (carry: pack.sh of main with every programmatic dependent at the same
# shared-memory carveout (launch.h's kDependentCarveout); extra.tar.xz as vbins/: golinear_base
# (e47e078, the session's start) and golinear_pre (call 4's build)): the hybrid decode tests
# first (stop if they fail), the 8B decode of base, pre and main alternated (B = 1, 4), the
# whole-model batch-1 rows, every GPU test binary, then racecheck of the hybrid decode tests.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
TEST_ARGS='--gtest_filter=*Hybrid*:*Decode*' plain_tests test_mixers_cuda || exit 0
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1,4 base:$V/golinear_base pre:$V/golinear_pre main:$G
contexts_ab base:$V/golinear_base main:$G
gpu_tests
printf '%s\n' "racecheck test_mixers_cuda *GpuHybridMixer*" "memcheck test_mixers_cuda *GpuHybridMixer*" |
  SAN_TIMEOUT=120 sanitize
echo "total $(el) s" >> $R
