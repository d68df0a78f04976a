#!/bin/bash
# Session 10, call 2 (issue 16): the attention kernels after call 1's profiles (exp2 as one
# MUFU, the masks on edge tiles only, a 4-deep backward ring, descriptors advanced by adds):
# GPU tests, then the mixer table against session 9's binary and SDPA in the same call, Nsight
# Compute of the three kernels again, the 8B transfer step (new, session 9), compute-sanitizer
# on the attention kernels, and the kernel durations of batch-1 8B decode steps. Everything but
# results.txt goes into $OUT/r.tar.xz (a call returns few files). Fuzzing beside on cores 8-15.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r /tmp/s9 && tar xJf carry2/s9bin.tar.xz -C /tmp/s9; S9=/tmp/s9/s9bin/golinear
mkdir -p /tmp/fz && tar -xJf carry2/fuzzbins.tar.xz -C /tmp/fz && { bash /tmp/fz/fuzzbins/fuzz_background.sh START ${FUZZ_SECONDS:-480} 8-15 /tmp/fz/run >> $R 2>&1; echo "fuzz started at $(el) s" >> $R; }
T1="taskset -c 0-7"
for t in test_attention_cuda test_kernels_cuda; do
  echo "== $t" >> /tmp/r/tests.txt; $T1 timeout 100 /tmp/bins/$t >> /tmp/r/tests.txt 2>&1; echo "$t exit $? at $(el) s" >> $R
done
grep -E "^\[  FAILED|^\[  PASSED|Failure" /tmp/r/tests.txt | head -20 >> $R
for rep in 1 2; do
  $T1 timeout 100 $G bench --mixers --seq 8192,16384,32768 --contexts 4096 > /tmp/r/mixers_new$rep.txt 2>&1; echo "mixers new exit $? at $(el) s" >> $R
  grep -iE "full attention" /tmp/r/mixers_new$rep.txt | grep -v decode | sed "s/^/new /" >> $R
  $T1 timeout 100 $S9 bench --mixers --seq 8192,16384,32768 --contexts 4096 > /tmp/r/mixers_s9_$rep.txt 2>&1; echo "mixers s9 exit $? at $(el) s" >> $R
  grep -iE "full attention" /tmp/r/mixers_s9_$rep.txt | grep -v decode | sed "s/^/s9  /" >> $R
done
(unset LD_LIBRARY_PATH; $T1 timeout 90 python3 scripts/device/anchors_attention.py >> $R 2>&1); echo "anchors exit $? at $(el) s" >> $R
NCU=/usr/local/cuda/bin/ncu
FULL="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats --section SourceCounters"
for k in fwd:flash_forward_wgmma dq:flash_backward_dq_wgmma dkdv:flash_backward_dkdv_wgmma; do
  n=${k%%:*}; re=${k#*:}
  $T1 timeout 60 $NCU --clock-control none $FULL -k "regex:$re" -c 1 -o /tmp/r/$n $G bench --mixers --seq 8192 --contexts 4096 --repeats 1 --warmups 0 > /dev/null 2>&1
  $NCU --import /tmp/r/$n.ncu-rep --page details --print-units base > /tmp/r/det_$n.txt 2>&1
  $NCU --import /tmp/r/$n.ncu-rep --page source --csv --print-units base > /tmp/r/src_$n.csv 2>&1
  echo "ncu $n at $(el) s: $(grep -E '^    Duration' /tmp/r/det_$n.txt) $(grep -E 'SM: Pipe Tensor Cycles Active ' /tmp/r/det_$n.txt | head -1)" >> $R
done
for b in "new:$G" "s9:$S9"; do
  $T1 timeout 90 ${b#*:} bench --transfer --config bench/configs/llama-3.1-8b.json --seq-len 4096 --steps 12 > /tmp/r/transfer_${b%%:*}.txt 2>&1
  echo "transfer ${b%%:*} exit $? at $(el) s" >> $R; grep -iE "tokens/s|min" /tmp/r/transfer_${b%%:*}.txt | head -4 >> $R
done
CS=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck synccheck racecheck; do
  $T1 timeout 100 $CS --tool $tool /tmp/bins/test_attention_cuda --gtest_filter='*LongCausal*' > /tmp/cs.txt 2>&1
  echo "$tool test_attention_cuda [LongCausal]: exit $?, $(grep -E 'SUMMARY' /tmp/cs.txt | tail -1), $(el) s" >> $R
  grep -E "^========= (Invalid|Race|Barrier|Error)" /tmp/cs.txt | sort | uniq -c | head -5 >> $R
done
$T1 timeout 120 $NCU --clock-control none --graph-profiling node --metrics gpu__time_duration.sum --csv --print-units base \
  $G bench --config bench/configs/llama-3.1-8b.json --batches 1 --contexts 4096 --decode-repeats 1 > /tmp/r/ncu_decode.csv 2> /tmp/r/ncu_decode_err.txt
echo "ncu decode exit $? at $(el) s, $(wc -l < /tmp/r/ncu_decode.csv) lines" >> $R
rm -f /tmp/r/*.ncu-rep; tar cJf $OUT/r.tar.xz -C /tmp r
bash /tmp/fz/fuzzbins/fuzz_background.sh COLLECT /tmp/fz/run >> $R 2>&1
echo "total $(el) s" >> $R
