#!/bin/bash
# Session 16, call 1 (carry: pack.sh of main at 70c9018; extra.tar.xz as vbins/: golinear with
# gemm.cu built -DGL_GEMV_EARLY=1 (early1: the GEMV's first four register loads issued before its
# programmatic wait) and =2 (early2: the same plus the rest of the first row cp.async'd into
# shared memory before the wait); fuse2: early2 with SwiGLU applied by the down projection's
# GEMV as it loads x (gemm_nt_swiglu); all0 / all2: SwiGLU and the RMSNorms applied by the GEMVs
# (gemm_nt_rmsnorm), without / with early2's loads (all2 with its test_ops_cuda and
# test_model_cuda)): the whole GPU suite of main (GpuTrainedStudent left out: the bundled model
# is not carried) and the trainers' two-stream tests twice more; all2's GEMV and model tests; 8B
# decode at 1 and 4 sequences of main and the five variants, three rounds alternated; the
# in-graph timeline of main and all2; every kernel of `bench --mixers` at 8K-32K (the attention
# backward's two kernels per length).
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/vt && tar xJf carry2/extra.tar.xz -C /tmp/vt
V=/tmp/vt/vbins
BIN_DIR=$V plain_tests test_ops_cuda_all2
BIN_DIR=$V TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_model_cuda_all2
grep -E "gemv" /tmp/r/test_ops_cuda_all2.txt | head -40 >> $R
ROUNDS=3 decode_ab 1,4 main:$G early1:$V/golinear_early1 early2:$V/golinear_early2 all0:$V/golinear_all0 all2:$V/golinear_all2
timeline main $G
timeline all2 $V/golinear_all2
mixers_timeline main $G
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests $(cd /tmp/bins && ls test_*_cuda)
TEST_ARGS=--gtest_repeat=2 plain_tests test_train_cuda
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
