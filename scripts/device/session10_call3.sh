#!/bin/bash
# Session 10, call 3 (issues 16, 17): batch-1 decode after call 1's kernel durations (the norm's
# row in registers, a float4 argmax, the GEMVs as programmatic dependents asking their first
# weights into L2): GPU tests, then the 8B-shaped decode rows of three binaries interleaved
# (new; new without the PDL launch; session 9's), warm-cache kernel durations of the new decode
# step, the GDN forward with value blocks of 32, and compute-sanitizer memcheck over the GPU
# test binaries call 1 did not reach. Outputs but results.txt in $OUT/r.tar.xz. Fuzzing beside.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r /tmp/s9 && tar xJf carry2/s9bin.tar.xz -C /tmp/s9; S9=/tmp/s9/s9bin/golinear
tar xJf carry2/nopdl.tar.xz -C /tmp; NP=/tmp/nopdl/golinear_nopdl
mkdir -p /tmp/fz && tar -xJf carry2/fuzzbins.tar.xz -C /tmp/fz && { bash /tmp/fz/fuzzbins/fuzz_background.sh START ${FUZZ_SECONDS:-500} 8-15 /tmp/fz/run >> $R 2>&1; echo "fuzz started at $(el) s" >> $R; }
T1="taskset -c 0-7"
for t in test_ops_cuda test_kernels_cuda test_model_cuda test_runtime_cuda test_eval_cuda; do
  echo "== $t" >> /tmp/r/tests.txt; $T1 timeout 100 /tmp/bins/$t --gtest_filter='-*TrainedStudent*' >> /tmp/r/tests.txt 2>&1; echo "$t exit $? at $(el) s" >> $R
done
grep -E "^\[  FAILED|^\[  PASSED|Failure" /tmp/r/tests.txt | head -20 >> $R
for rep in 1 2; do
  for b in "new:$G" "nopdl:$NP" "s9:$S9"; do
    $T1 timeout 100 ${b#*:} bench --config bench/configs/llama-3.1-8b.json --batches 1,4 --contexts 4096 --decode-repeats 20 > /tmp/r/dec_${b%%:*}_$rep.txt 2>&1
    echo "decode ${b%%:*} exit $? at $(el) s: $(grep -E '^bench: ' /tmp/r/dec_${b%%:*}_$rep.txt | sed -E 's/.*(hybrid|full) N=([0-9]+) B=([0-9]+) step ([0-9.]+) ms.*/\1 B=\3 \4 ms/' | tr '\n' ';')" >> $R
  done
done
NCU=/usr/local/cuda/bin/ncu
$T1 timeout 100 $NCU --clock-control none --cache-control none --graph-profiling node --metrics gpu__time_duration.sum --csv --print-units base \
  $G bench --config bench/configs/llama-3.1-8b.json --batches 1 --contexts 4096 --decode-repeats 1 --variants hybrid > /tmp/r/ncu_decode_warm.csv 2> /tmp/r/ncu_decode_err.txt
echo "ncu decode (warm) exit $? at $(el) s" >> $R
for vb in 64 32; do
  $T1 timeout 60 $G bench --mixers --seq 16384,32768 --contexts 4096 --value-block $vb > /tmp/r/gdn_vb$vb.txt 2>&1
  echo "gdn value block $vb exit $?: $(grep -E 'gated deltanet \(chunked\) +prefill' /tmp/r/gdn_vb$vb.txt | awk '{print $(NF)}' | tr '\n' ' ')" >> $R
done
CS=/usr/local/cuda/bin/compute-sanitizer
for t in test_gated_delta_cuda test_mixers_cuda test_attention_cuda test_model_cuda test_train_cuda; do
  [ $(el) -gt 470 ] && { echo "memcheck $t skipped (time)" >> $R; continue; }
  $T1 timeout 120 $CS --tool memcheck /tmp/bins/$t --gtest_filter='-*TrainedStudent*' > /tmp/cs.txt 2>&1
  echo "memcheck $t [all]: exit $?, $(grep -E 'SUMMARY' /tmp/cs.txt | tail -1), $(grep -E '^\[  (PASSED|FAILED)' /tmp/cs.txt | tr '\n' ' ') $(el) s" >> $R
  grep -E "^========= (Invalid|Race|Barrier|Error|Program hit)" /tmp/cs.txt | sort | uniq -c | head -5 >> $R
  tail -c 3000 /tmp/cs.txt > /tmp/r/memcheck_$t.txt
done
tar cJf $OUT/r.tar.xz -C /tmp r
bash /tmp/fz/fuzzbins/fuzz_background.sh COLLECT /tmp/fz/run >> $R 2>&1
echo "total $(el) s" >> $R
