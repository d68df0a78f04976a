#!/bin/bash
# Session 15, call 5 (carry: extra.tar.xz of five CLIs built from main with the split decode
# kernel and without the GEMV's L2 prefetch: golinear_base; _nopdl, its GEMV launched plainly;
# _u8 / _u2, its GEMV's row loop unrolled by 8 / 2 instead of 4; _chain, each GEMV starting its
# dependent at once and the norm, the qkv split and the SwiGLU launched as programmatic
# dependents; libkernel_timeline.so + libcupti.so.13): batch-1 and batch-4 8B decode of the five
# alternated (2 rounds), the in-graph kernel times of base and chain.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r
tar xJf carry2/extra.tar.xz -C /tmp/bins/
cp carry2/libkernel_timeline.so carry2/libcupti.so.13 /tmp/lib/
CFG=bench/configs/llama-3.1-8b.json
T1="taskset -c 0-7"
for rep in 1 2; do
  for b in base nopdl u8 u2 chain; do
    $T1 timeout 120 /tmp/bins/golinear_$b bench --config $CFG --batches 1,4 --contexts 4096 --decode-repeats 20 > /tmp/r/decode_${b}_$rep.txt 2>&1
    echo "decode $b rep $rep exit $? at $(el) s" >> $R; grep -E "^bench:|error" /tmp/r/decode_${b}_$rep.txt >> $R
  done
done
for b in base chain; do
  CUDA_INJECTION64_PATH=/tmp/lib/libkernel_timeline.so KERNEL_TIMELINE_OUT=/tmp/r/timeline_$b.txt \
    $T1 timeout 120 /tmp/bins/golinear_$b bench --config $CFG --batches 1 --contexts 4096 --variants hybrid --decode-repeats 20 > /tmp/r/tl_decode_$b.txt 2>&1
  echo "timeline $b exit $? at $(el) s" >> $R; cat /tmp/r/timeline_$b.txt >> $R
done
echo "total $(el) s" >> $R
