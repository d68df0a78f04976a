#!/bin/bash
# Session 9, call 3: s9-int with the wgmma backward (dq, dk/dv) for full causal attention, the
# packed prefills of batched generation (branch leftovers) and the GEMV reverted. The attention
# tests first, the mixer table (fwd, fwd+bwd) at 8K/16K/32K beside SDPA in the same call, every GPU
# test binary, then compute-sanitizer (memcheck, racecheck, synccheck) on the new attention
# kernels (LongCausal: T = 2500 and 1500) and synccheck on the KV decode kernels. Fuzzing beside.
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
[ $(el) -lt 500 ] && { $T1 timeout 80 $CS --tool synccheck /tmp/bins/test_kernels_cuda --gtest_filter='CudaAttention.Decode*' > /tmp/cs.txt 2>&1
  echo "synccheck test_kernels_cuda [Decode*]: exit $?, $(grep -E 'SUMMARY' /tmp/cs.txt | tail -1), $(el) s" >> $R; }
bash /tmp/fz/fuzzbins/fuzz_background.sh COLLECT /tmp/fz/run >> $R 2>&1
echo "total $(el) s" >> $R
