#!/bin/bash
# Session 19, call 3 (carry: as call 2; extra.tar.xz: the wgmma tree at 66322c8 with the backward's forward
# at the forward's value_block — call 2's wg build passed 32, no longer a state-pass value block):
# the wgmma tree's GDN, mixer and trainer tests, the mixer bench of main, wg and wg at value block
# 64 (one round), fla's GDN forward in the same call, the 8B attention transfer of main and wg.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra fla
BIN_DIR=$V plain_tests test_gated_delta_cuda_wg test_mixers_cuda_wg test_train_cuda_wg
P='full attention \(ours|gated deltanet \(chunked\)|sink\+window|hybrid \(gdn.*prefill'
ROUNDS=1 mixers_ab "$P" main:$G wg:$V/golinear_wg "wg64:$V/golinear_wg:--value-block 64"
fla_anchor
transfer_ab main:$G wg:$V/golinear_wg
cp /tmp/r/mixers_*_1.txt $OUT/ 2>/dev/null
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
