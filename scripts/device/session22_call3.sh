#!/bin/bash
# Session 22, call 5 (carry: pack.sh of main + the one-row qkv product writing q, k, v in bf16
# itself when nothing comes between it and the split (no bias, q/k norm, adapters); extra.tar.xz
# as vbins/: golinear_base = 206be3a's CLI, golinear_split = the same tree with the split kept
# (variant.sh of model/cuda/gpu_model.cpp)): the decode-path GPU tests, 8B decode of split and
# new alternated (B = 1, 4; base once), the in-graph kernel times of both.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_model_cuda test_runtime_cuda \
  test_eval_cuda test_mixers_cuda
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1,4 split:$V/golinear_split new:$G
ROUNDS=1 DECODE_TIMEOUT=40 decode_ab 1,4 base:$V/golinear_base
timeline split $V/golinear_split
timeline new $G
echo "total $(el) s" >> $R
