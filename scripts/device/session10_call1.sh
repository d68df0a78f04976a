#!/bin/bash
# Session 10, call 1 (issues 16, 17): the CudaEvent owners of the pinned snapshots under the
# tests that make two streams meet (test_runtime_cuda, test_model_cuda, test_train_cuda,
# repeated); Nsight Compute of the wgmma attention kernels at 8K (forward, dq, dk/dv) and of
# cuDNN's SDPA kernels beside them, of the GDN forward's kernels at 16K, and the kernel durations
# of batch-1 8B decode steps; compute-sanitizer memcheck over the GPU test binaries that fit.
# Fuzzing beside on cores 8-15.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/fz && tar -xJf carry2/fuzzbins.tar.xz -C /tmp/fz && { bash /tmp/fz/fuzzbins/fuzz_background.sh START ${FUZZ_SECONDS:-470} 8-15 /tmp/fz/run >> $R 2>&1; echo "fuzz started at $(el) s" >> $R; }
T1="taskset -c 0-7"
for t in test_runtime_cuda test_model_cuda; do
  echo "== $t x3" >> $OUT/tests.txt
  $T1 timeout 120 /tmp/bins/$t --gtest_repeat=3 --gtest_filter='-*TrainedStudent*' >> $OUT/tests.txt 2>&1
  echo "$t x3 exit $? at $(el) s" >> $R
done
echo "== test_train_cuda x2" >> $OUT/tests.txt
$T1 timeout 120 /tmp/bins/test_train_cuda --gtest_repeat=2 >> $OUT/tests.txt 2>&1; echo "test_train_cuda x2 exit $? at $(el) s" >> $R
grep -E "^\[  FAILED|Failure" $OUT/tests.txt | sort | uniq -c | head -20 >> $R
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
echo "ncu: $NCU" >> $R
FULL="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats --section SourceCounters"
prof() {  # name, seq, kernel regex
  $T1 timeout 120 $NCU --clock-control none $FULL -k "regex:$3" -c 1 -o $OUT/$1 \
    $G bench --mixers --seq $2 --contexts 4096 --repeats 1 --warmups 0 > /tmp/ncu_$1.txt 2>&1
  echo "ncu $1 exit $? at $(el) s" >> $R
  $NCU --import $OUT/$1.ncu-rep --page details --print-units base > $OUT/ncu_$1.txt 2>&1
  grep -E "^  [a-z_]+.*\(|Duration|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy" $OUT/ncu_$1.txt | head -6 | sed "s/^/  /" >> $R
}
prof fwd 8192 flash_forward_wgmma
prof dq 8192 flash_backward_dq_wgmma
prof dkdv 8192 flash_backward_dkdv_wgmma
prof gdn_prepare 16384 gdn_prepare
prof gdn_state 16384 gdn_state_pass
# cuDNN's kernels for the same 8K shape (the forward and the backward's), second iteration.
(unset LD_LIBRARY_PATH; $T1 timeout 150 $NCU --clock-control none $FULL -k "regex:sdpa|cudnn|flash|bprop|dot_product" --launch-skip 0 -c 12 -o $OUT/sdpa python3 scripts/device/sdpa_once.py 8192 > /tmp/ncu_sdpa.txt 2>&1; echo "ncu sdpa exit $? at $(el) s" >> $R
 $NCU --import $OUT/sdpa.ncu-rep --page details --print-units base > $OUT/ncu_sdpa.txt 2>&1)
grep -E "^  [a-zA-Z_].*\(|Duration" $OUT/ncu_sdpa.txt | head -30 | sed "s/^/  /" >> $R
# Batch-1 decode steps of the 8B shape: every kernel's duration (one metric: a pass each).
$T1 timeout 150 $NCU --clock-control none --graph-profiling node --metrics gpu__time_duration.sum --csv --print-units base \
  $G bench --config bench/configs/llama-3.1-8b.json --batches 1 --contexts 4096 --decode-repeats 1 > $OUT/ncu_decode.csv 2> /tmp/ncu_dec_err.txt
echo "ncu decode exit $? at $(el) s, $(wc -l < $OUT/ncu_decode.csv) lines" >> $R
tail -3 /tmp/ncu_dec_err.txt >> $R
# compute-sanitizer memcheck over the whole of the binaries that fit (issue 17).
CS=/usr/local/cuda/bin/compute-sanitizer
for t in test_kernels_cuda test_ops_cuda test_gated_linear_cuda test_runtime_cuda test_eval_cuda test_analysis_cuda; do
  [ $(el) -gt 430 ] && { echo "memcheck $t skipped (time)" >> $R; continue; }
  $T1 timeout 90 $CS --tool memcheck /tmp/bins/$t --gtest_filter='-*TrainedStudent*' > /tmp/cs.txt 2>&1
  echo "memcheck $t [all]: exit $?, $(grep -E 'SUMMARY' /tmp/cs.txt | tail -1), $(grep -E '^\[  (PASSED|FAILED)' /tmp/cs.txt | tr '\n' ' ') $(el) s" >> $R
  grep -E "^========= (Invalid|Race|Barrier|Error|Program hit)" /tmp/cs.txt | sort | uniq -c | head -5 >> $R
  cp /tmp/cs.txt $OUT/memcheck_$t.txt
done
bash /tmp/fz/fuzzbins/fuzz_background.sh COLLECT /tmp/fz/run >> $R 2>&1
echo "total $(el) s" >> $R
