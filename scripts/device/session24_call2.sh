#!/bin/bash
# Session 24, call 2 (carry: libs, the timeline library, extra.tar.xz as vbins/: golinear_base
# (e47e078), golinear_new (call 1's build), and four builds of the new one without some of the
# decode step's kernels — its results wrong, what each costs: nonorm (no RMSNorm launches),
# noswiglu, nomixer (no hybrid decode kernel), gemvonly (none of the three) — and phases4 (the new
# hybrid decode kernel with session24_decode_phases.patch's stamps)): batch-1 8B decode of each,
# two rounds alternated; the phase stamps of the new kernel in the model's step.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
ROUNDS=2 DECODE_TIMEOUT=40 decode_ab 1 base:$V/golinear_base new:$V/golinear_new \
  nonorm:$V/golinear_nonorm noswiglu:$V/golinear_noswiglu nomixer:$V/golinear_nomixer \
  gemvonly:$V/golinear_gemvonly
decode_probe phases $V/golinear_phases4 "^phases" 16
echo "total $(el) s" >> $R
