#!/bin/bash
# Session 9, call 7: the dk/dv kernel with its P and dS written back into the accumulators and
# packed after (GL_DKDV_PACK=1: call 3's form, which ptxas answers with an injected wait and
# arrive) against call 5's packing straight into the A fragments (dk0): the attention tests of
# the variant, fwd+bwd at 8K and 32K, two rounds, SDPA beside.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
tar xJf carry2/v7.tar.xz -C /tmp
T1="taskset -c 0-7"
$T1 timeout 60 /tmp/v6/dk3/test_attention_cuda > /tmp/t.txt 2>&1; echo "dk3 test_attention_cuda exit $? $(grep -E '^\[  (PASSED|FAILED)' /tmp/t.txt | tr '\n' ' ')" >> $R
for round in 1 2; do
  for v in dk0 dk3; do
    $T1 timeout 60 /tmp/v6/$v/golinear bench --mixers --seq 8192,32768 --contexts 4096 > /tmp/m.txt 2>&1
    grep -iE "full attention" /tmp/m.txt | grep "fwd+bwd" | sed "s/^/  round $round $v /" >> $R
  done
done
(unset LD_LIBRARY_PATH; $T1 timeout 90 python3 scripts/device/anchors_attention.py 2>&1 | grep '^{' >> $R)
echo "total $(el) s" >> $R
