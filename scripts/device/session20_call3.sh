#!/bin/bash
# Session 20, call 3 (carry: carry2/ from pack.sh of the tree with the new persistent defaults —
# 64 wait groups, 4 prepare launches, from 8K — as bins/; extra.tar.xz as vbins/: golinear_old,
# call 2's CLI, whose defaults are the previous ones; fla.tar.xz): every GPU test binary
# (GpuTrainedStudent left out: the bundled model is not carried), the GDN forward of the new
# defaults, the old binary and the new one at 2, 3 and 8 prepare launches (six rounds
# alternated, forward only), then the whole mixer table (with the backward) of new and old, two
# rounds, with fla's forward and SDPA in the same call.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra fla
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_gated_delta_cuda test_mixers_cuda \
  test_model_cuda test_runtime_cuda test_eval_cuda test_train_cuda test_analysis_cuda \
  test_attention_cuda test_gated_linear_cuda test_kernels_cuda test_ops_cuda
P='gated deltanet \(chunked\)|hybrid \(gdn.*prefill'
MIXERS_ARGS=--no-backward ROUNDS=6 mixers_ab "$P" new:$G old:$V/golinear_old \
  "s2:$G:--gdn-segments 2" "s3:$G:--gdn-segments 3" "s8:$G:--gdn-segments 8"
P='full attention \(ours|gated deltanet \(chunked\)|sink\+window|hybrid \(gdn.*prefill'
FIRST_ROUND=7 ROUNDS=8 mixers_ab "$P" new:$G old:$V/golinear_old
fla_anchor
sdpa_anchors
cp /tmp/r/mixers_new_7.txt /tmp/r/mixers_old_7.txt $OUT/ 2>/dev/null
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
