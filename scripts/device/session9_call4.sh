#!/bin/bash
# Session 9, call 4: as call 3 (session9_call3.sh) with the dk/dv kernel reading each tile's lse
# and dsum through a warpgroup buffer (call 3 took them by bulk copy from head-major copies the
# prepare kernel wrote: dk came out NaN). The attention tests first, the mixer table (fwd,
# fwd+bwd) at 8K/16K/32K beside SDPA in the same call, every GPU test binary, compute-sanitizer
# (memcheck, racecheck, synccheck) on the attention kernels (LongCausal: T = 2500 and 1500).
# Fuzzing beside.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/fz && tar -xJf carry2/fuzzbins.tar.xz -C /tmp/fz && { bash /tmp/fz/fuzzbins/fuzz_background.sh START ${FUZZ_SECONDS:-500} 8-15 /tmp/fz/run >> $R 2>&1; echo "fuzz started at $(el) s" >> $R; }
T1="taskset -c 0-7"
echo "== test_attention_cuda" >> $OUT/tests.txt
$T1 timeout 90 /tmp/bins/test_attention_cuda >> $OUT/tests.txt 2>&1; echo "test_attention_cuda exit $? at $(el) s" >> $R
grep -E "^\[  FAILED|^\[  PASSED|Failure" $OUT/tests.txt | head -20 >> $R
grep -B1 -A6 "window=-1" $OUT/tests.txt | grep -E "T=(1000|2500|1500)|nmse" | head -24 >> $R
$T1 timeout 150 $G bench --mixers --seq 8192,16384,32768 --contexts 4096 > $OUT/mixers.txt 2>&1; echo "mixers exit $? at $(el) s" >> $R
grep -iE "full attention" $OUT/mixers.txt | grep -v decode >> $R
(unset LD_LIBRARY_PATH; $T1 timeout 90 python3 scripts/device/anchors_attention.py >> $R 2>&1); echo "anchors exit $? at $(el) s" >> $R
for t in test_kernels_cuda test_ops_cuda test_gated_delta_cuda test_gated_linear_cuda test_mixers_cuda \
         test_model_cuda test_runtime_cuda test_eval_cuda test_analysis_cuda test_train_cuda; do
  echo "== $t" >> $OUT/tests.txt; $T1 timeout 100 /tmp/bins/$t >> $OUT/tests.txt 2>&1; echo "$t exit $? at $(el) s" >> $R
done
grep -E "^\[  FAILED|^\[  PASSED|Failure" $OUT/tests.txt | tail -n +2 | head -30 >> $R
CS=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck synccheck racecheck; do
  [ $(el) -gt 480 ] && { echo "$tool skipped (time)" >> $R; continue; }
  $T1 timeout 100 $CS --tool $tool /tmp/bins/test_attention_cuda --gtest_filter='*LongCausal*' > /tmp/cs.txt 2>&1
  echo "$tool test_attention_cuda [LongCausal]: exit $?, $(grep -E 'SUMMARY' /tmp/cs.txt | tail -1), $(el) s" >> $R
  grep -E "^========= (Invalid|Race|Barrier|Error)" /tmp/cs.txt | sort | uniq -c | head -5 >> $R
done
bash /tmp/fz/fuzzbins/fuzz_background.sh COLLECT /tmp/fz/run >> $R 2>&1
echo "total $(el) s" >> $R
