#!/bin/bash
# Session 18, call 5: the closing table. main's CLI (vbins/golinear_head: 827aa06, the swizzled
# tiles and the tf32 merges) — the whole mixer bench at 8K, 16K, 32K with the backward, two
# rounds — with PyTorch SDPA and fla's GDN forward in the same call.
cd "$(dirname "$0")/../.."  # (bins.tar.xz not carried)
source scripts/device/setup.sh
unpack_extra fla
sdpa_anchors
P='full attention \(ours|gated deltanet \(chunked\)|sink\+window|hybrid \(gdn.*prefill'
mixers_ab "$P" main:$V/golinear_head
fla_anchor
cp /tmp/r/mixers_main_*.txt $OUT/
echo "total $(el) s" >> $R
