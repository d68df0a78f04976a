#!/bin/bash
# Session 9, call 5: the dk/dv kernel loads each tile's lse/dsum column values one tile ahead
# (call 4: loaded and stored in the same tile, fwd+bwd 104 ms at 32K against 77 ms of call 3's
# faulty bulk-copy version). The attention tests (test_attention_cuda, test_ops_cuda), the mixer
# table at 8K/16K/32K beside SDPA in the same call, compute-sanitizer on LongCausal. Fuzzing beside.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
tar xJf carry2/bins5.tar.xz -C /tmp  # this call's binaries over setup's
mkdir -p /tmp/fz && tar -xJf carry2/fuzzbins.tar.xz -C /tmp/fz && { bash /tmp/fz/fuzzbins/fuzz_background.sh START ${FUZZ_SECONDS:-120} 8-15 /tmp/fz/run >> $R 2>&1; echo "fuzz started at $(el) s" >> $R; }
T1="taskset -c 0-7"
for t in test_attention_cuda test_ops_cuda; do
  echo "== $t" >> $OUT/tests.txt; $T1 timeout 90 /tmp/bins/$t >> $OUT/tests.txt 2>&1; echo "$t exit $? at $(el) s" >> $R
done
grep -E "^\[  FAILED|^\[  PASSED|Failure" $OUT/tests.txt | head -20 >> $R
for round in 1 2; do
  $T1 timeout 150 $G bench --mixers --seq 8192,16384,32768 --contexts 4096 > /tmp/m.txt 2>&1; echo "mixers round $round exit $? at $(el) s" >> $R
  grep -iE "full attention" /tmp/m.txt | grep -v decode >> $R; cat /tmp/m.txt >> $OUT/mixers.txt
  (unset LD_LIBRARY_PATH; $T1 timeout 90 python3 scripts/device/anchors_attention.py 2>&1 | grep '^{' >> $R); echo "anchors exit $? at $(el) s" >> $R
done
CS=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck synccheck racecheck; do
  $T1 timeout 100 $CS --tool $tool /tmp/bins/test_attention_cuda --gtest_filter='*LongCausal*' > /tmp/cs.txt 2>&1
  echo "$tool test_attention_cuda [LongCausal]: exit $?, $(grep -E 'SUMMARY' /tmp/cs.txt | tail -1), $(el) s" >> $R
done
bash /tmp/fz/fuzzbins/fuzz_background.sh COLLECT /tmp/fz/run >> $R 2>&1
echo "total $(el) s" >> $R
