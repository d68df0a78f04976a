#!/bin/bash
# Session 15, call 5 (carry: extra.tar.xz of five CLIs built from main with the split decode
# kernel and without the GEMV's L2 prefetch: golinear_base; _nopdl, its GEMV launched plainly;
# _u8 / _u2, its GEMV's row loop unrolled by 8 / 2 instead of 4; _chain, each GEMV starting its
# dependent at once and the norm, the qkv split and the SwiGLU launched as programmatic
# dependents; libkernel_timeline.so + libcupti.so.13): batch-1 and batch-4 8B decode of the five
# alternated (2 rounds), the in-graph kernel times of base and chain.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
tar xJf carry2/extra.tar.xz -C /tmp/bins/
decode_ab 1,4 $(for b in base nopdl u8 u2 chain; do echo $b:/tmp/bins/golinear_$b; done)
timeline base /tmp/bins/golinear_base
timeline chain /tmp/bins/golinear_chain
echo "total $(el) s" >> $R
