#!/bin/bash
# Session 22, call 9 (carry: pack.sh of main at eb139c3 (GEMV grids of 16 blocks an SM, 64
# registers: 4 blocks an SM resident); extra.tar.xz as vbins/ (variant.sh of gemm.cu):
# golinear_lb5 / lb6 / lb8 = gemv_kernel under __launch_bounds__(256, 5 / 6 / 8) — 48 / 40 / 32
# registers, 60 / 92 / 116 bytes spilled, 5 / 6 / 8 blocks an SM — and golinear_b32 = grids of
# 32 blocks an SM): 8B decode at B = 1 of all five alternated, three rounds.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
ROUNDS=3 DECODE_TIMEOUT=30 decode_ab 1 main:$G lb5:$V/golinear_lb5 lb6:$V/golinear_lb6 \
  lb8:$V/golinear_lb8 b32:$V/golinear_b32
echo "total $(el) s" >> $R
