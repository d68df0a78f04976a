#!/bin/bash
# Session 9, call 6: where the dk/dv kernel's column values (each query tile's lse and dsum) come
# from, three builds (GL_DKDV_COLS): 0 = a warpgroup buffer behind a named barrier (call 5),
# 1 = each thread's 32 values straight into registers (ptxas: 100 bytes of spills), 2 = a buffer
# per warp (no barrier across warps). Each: the attention tests, then fwd+bwd at 8K and 32K;
# SDPA beside them in the same call.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
tar xJf carry2/v6.tar.xz -C /tmp
T1="taskset -c 0-7"
for v in dk0 dk1 dk2; do
  $T1 timeout 60 /tmp/v6/$v/test_attention_cuda > /tmp/t.txt 2>&1; echo "$v test_attention_cuda exit $? $(grep -E '^\[  (PASSED|FAILED)' /tmp/t.txt | tr '\n' ' ')" >> $R
  cat /tmp/t.txt >> $OUT/tests.txt
done
for round in 1 2; do
  for v in dk0 dk1 dk2; do
    $T1 timeout 60 /tmp/v6/$v/golinear bench --mixers --seq 8192,32768 --contexts 4096 > /tmp/m.txt 2>&1
    grep -iE "full attention" /tmp/m.txt | grep "fwd+bwd" | sed "s/^/  round $round $v /" >> $R; cat /tmp/m.txt >> $OUT/mixers.txt
  done
done
(unset LD_LIBRARY_PATH; $T1 timeout 90 python3 scripts/device/anchors_attention.py 2>&1 | grep '^{' >> $R)
echo "total $(el) s" >> $R
