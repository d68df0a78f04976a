#!/bin/bash
# Packs carry2/ for a call of this folder (README above): the shared libraries golinear's binaries
# load from this machine (libs.tar.xz, as libs/), the CLI, the load generator and the GPU test
# binaries of build/, stripped (bins.tar.xz, as bins/), and tests/data/fixtures (fixtures.tar.xz,
# as fixtures/). Run from the repository root after `cmake --build build`; extra files to carry go
# into carry2/ by hand (name them in the call's script).
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
mkdir -p carry2 && T=$(mktemp -d)
mkdir -p $T/bins $T/libs
cp $B/golinear $B/bench/golinear_serve_load $B/tests/test_*_cuda $T/bins/
strip $T/bins/*
# Every library of this machine the binaries need that the GPU machine may lack or have older
# (not the C library, the CUDA driver or the CUDA toolkit's libraries: the GPU machine has the same toolkit).
ldd $T/bins/* 2>/dev/null | awk '/=> \// {print $3}' | sort -u |
  grep -vE "/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda)\.so|/usr/local/cuda" | xargs -I{} cp -L {} $T/libs/
tar cJf carry2/bins.tar.xz -C $T bins
tar cJf carry2/libs.tar.xz -C $T libs
tar cJf carry2/fixtures.tar.xz -C tests/data fixtures
rm -rf $T
ls -la carry2/
