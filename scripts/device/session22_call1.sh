#!/bin/bash
# Session 22, calls 2 and 3 (experiments/session22_l2_prefetch.patch on 3f3dfa1; run twice: the
# first run put the prefetch only in the single-sequence step,
# which bench does not use; carry: pack.sh of main + l2_prefetch — the o weights asked into L2 by a
# kernel chained after the decode mixer; extra.tar.xz as vbins/: golinear_base = 206be3a's CLI,
# golinear_pf16 / pfgu8 / pfgu16 / pf0 = 16 MiB of o, o + 8 or 16 MiB of gate/up,
# nothing asked (the chain link alone); libkernel_timeline.so + libcupti.so.13): decode A/B at
# B = 1, 4, the in-graph kernel times of base and new, then the decode-path GPU tests.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
ROUNDS=2 DECODE_TIMEOUT=30 decode_ab 1,4 base:$V/golinear_base new:$G pf16:$V/golinear_pf16 \
  pfgu8:$V/golinear_pfgu8 pfgu16:$V/golinear_pfgu16 pf0:$V/golinear_pf0
timeline base $V/golinear_base
timeline new $G
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_model_cuda test_runtime_cuda \
  test_eval_cuda test_mixers_cuda
echo "total $(el) s" >> $R
