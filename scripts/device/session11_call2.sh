#!/bin/bash
# Session 11, call 2: the one-kernel backward with its turns kept by two warps of the producer
# warpgroup (variant C), its tests, and the attention rows of C, of C without the turns
# (NO_TURNS: not deterministic), without the adds (NO_ADDS: dq wrong), without dQ at all (NO_DQ:
# the dK/dV work alone), of call 1's kernel and of main's two kernels, SDPA in the same call.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r /tmp/base && tar xJf carry2/base.tar.xz -C /tmp/base && tar xJf carry2/vars.tar.xz -C /tmp
T1="taskset -c 0-7"
$T1 timeout 150 /tmp/vars/test_attention_cuda_C --gtest_repeat=3 > /tmp/r/tests.txt 2>&1; echo "attention tests C exit $? at $(el) s" >> $R
grep -E "^\[  FAILED|^\[  PASSED|not deterministic" /tmp/r/tests.txt | sort | uniq -c >> $R
for rep in 1 2; do
  for b in "C:/tmp/vars/golinear_C" "NO_TURNS:/tmp/vars/golinear_NO_TURNS" "NO_ADDS:/tmp/vars/golinear_NO_ADDS" \
           "NO_DQ:/tmp/vars/golinear_NO_DQ" "call1:$G" "base:/tmp/base/base/golinear"; do
    $T1 timeout 100 ${b#*:} bench --mixers --seq 8192,16384,32768 --contexts 4096 > /tmp/r/mixers_${b%%:*}_$rep.txt 2>&1
    echo "${b%%:*} rep $rep exit $? at $(el) s: $(grep -E 'full attention \(ours, wgmma.*fwd\+bwd' /tmp/r/mixers_${b%%:*}_$rep.txt | awk '{print $(NF-5)}' | tr '\n' ' ')" >> $R
  done
done
(unset LD_LIBRARY_PATH; $T1 timeout 90 python3 scripts/device/anchors_attention.py >> $R 2>&1); echo "anchors exit $? at $(el) s" >> $R
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
