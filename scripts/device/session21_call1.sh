#!/bin/bash
# Session 21, call 1 (carry: pack.sh of the tree with the weight-streaming GEMV — a ring of 3
# slots of 4 KiB a warp — with the RMSNorm folded into the GEMVs that read it, the SwiGLU into
# the gate/up GEMV and the qkv split's bf16 rows into the qkv GEMV; extra.tar.xz as vbins/:
# golinear_base = 206be3a's CLI (the register GEMV), golinear_noqkv = new without the qkv fold,
# golinear_nonorm / _nosw / _plain = noqkv without the norm fold / the SwiGLU fold / either;
# libkernel_timeline.so, libcupti.so.13). The op tests first (a hang or failure stops the call),
# then 8B decode of the six alternated (B = 1, 4), the decode-path tests, in-graph kernel times
# of new and base, the rest of the GPU suite but test_gated_delta_cuda (no code of its changed).
# Written onto setup.sh's ops_first and decode_ab after it ran: the same steps.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
ops_first gemv || exit 0
ROUNDS=2 DECODE_TIMEOUT=30 decode_ab 1,4 base:$V/golinear_base new:$G noqkv:$V/golinear_noqkv nonorm:$V/golinear_nonorm nosw:$V/golinear_nosw plain:$V/golinear_plain
grep -q "decode new rep 1 exit 0" $R || exit 0
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_model_cuda test_runtime_cuda \
  test_eval_cuda test_mixers_cuda test_attention_cuda
timeline new $G
timeline base $V/golinear_base
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_train_cuda test_kernels_cuda \
  test_analysis_cuda test_gated_linear_cuda
echo "total $(el) s" >> $R
