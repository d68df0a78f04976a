#!/bin/bash
# Session 11, call 3: the one-kernel backward with dQ added by tensor reduce-adds from shared memory (T), its tests,
# and the attention rows of T, T without the turns, T without dQ (2 stages), main, SDPA in one call.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r /tmp/base && tar xJf carry2/base.tar.xz -C /tmp/base && tar xJf carry2/vars.tar.xz -C /tmp
T1="taskset -c 0-7"
$T1 timeout 150 /tmp/vars/test_attention_cuda_T --gtest_repeat=3 > /tmp/r/tests.txt 2>&1; echo "attention tests T exit $? at $(el) s" >> $R
grep -E "^\[  FAILED|^\[  PASSED|not deterministic" /tmp/r/tests.txt | sort | uniq -c >> $R
for rep in 1 2; do
  for b in "T:/tmp/vars/golinear_T" "NO_TURNS:/tmp/vars/golinear_NO_TURNS" \
           "NO_DQ:/tmp/vars/golinear_NO_DQ" "base:/tmp/base/base/golinear"; do
    $T1 timeout 100 ${b#*:} bench --mixers --seq 8192,16384,32768 --contexts 4096 > /tmp/r/mixers_${b%%:*}_$rep.txt 2>&1
    echo "${b%%:*} rep $rep exit $? at $(el) s: $(grep -E 'full attention \(ours, wgmma.*fwd\+bwd' /tmp/r/mixers_${b%%:*}_$rep.txt | awk '{print $(NF-5)}' | tr '\n' ' ')" >> $R
  done
done
(unset LD_LIBRARY_PATH; $T1 timeout 90 python3 scripts/device/anchors_attention.py >> $R 2>&1); echo "anchors exit $? at $(el) s" >> $R
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
