#!/bin/bash
# Session 24, call 5 (carry: libs, extra.tar.xz as vbins/: golinear_pre (call 4's build) and
# variants of it — blk (each decode block's entry, wait-return and end times; the last block
# prints their spread), ew (the decode kernel returns right after its wait: what its work after
# the wait costs), carve100 / carve60 (every programmatic-dependent kernel of the step asks for a
# 100% / 60% shared-memory carveout, so that no SM reconfigures between them)): batch-1 8B decode
# of each, three rounds alternated; the block spreads.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1 pre:$V/golinear_pre ew:$V/golinear_ew \
  carve100:$V/golinear_carve100 carve60:$V/golinear_carve60
decode_probe blocks $V/golinear_blk "^blocks" 12
echo "total $(el) s" >> $R
