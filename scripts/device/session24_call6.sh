#!/bin/bash
# Session 24, call 6 (carry: libs, the timeline library with KERNEL_TIMELINE_TRACE, extra.tar.xz
# as vbins/: golinear_pre (call 4's build), ew (its decode kernel returning after its wait),
# nomixer (call 2's: no decode kernel at all), carve50 / carve60 / carve75 (every programmatic
# dependent asking for that shared-memory carveout)): batch-1 8B decode of pre and the carveouts,
# three rounds alternated; then 30 consecutive kernels of a traced decode step of pre, ew and
# nomixer.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
ROUNDS=3 DECODE_TIMEOUT=40 decode_ab 1 pre:$V/golinear_pre carve50:$V/golinear_carve50 \
  carve60:$V/golinear_carve60 carve75:$V/golinear_carve75
for b in pre ew nomixer; do
  KERNEL_TIMELINE_TRACE=2600:30 CUDA_INJECTION64_PATH=/tmp/lib/libkernel_timeline.so \
    KERNEL_TIMELINE_OUT=/tmp/r/trace_$b.txt $T1 timeout 60 $V/golinear_$b bench --config $CFG \
    --batches 1 --contexts 4096 --variants hybrid --decode-repeats 20 > /tmp/r/tr_$b.txt 2>&1
  echo "trace $b exit $? at $(el) s" >> $R; grep -E "^bench:" /tmp/r/tr_$b.txt >> $R
  grep -E "^trace|^#" /tmp/r/trace_$b.txt >> $R
done
echo "total $(el) s" >> $R
