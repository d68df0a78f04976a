#!/bin/bash
# Session 20, call 4 (carry: as call 3): Nsight Compute of the GDN prepare alone at 16K (the whole
# GPU, --gdn-segments 1: one launch of 256 chunks × 32 heads), with per-instruction counters, and
# the 8B batch-1 decode step at 4K context, two rounds.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
ncu_profile prep gdn_prepare_kernel 1 \
  $G bench --mixers --seq 16384 --contexts 4096 --repeats 1 --warmups 0 --no-backward --gdn-segments 1
ROUNDS=2 decode_ab 1 new:$G
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
