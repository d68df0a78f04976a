#!/bin/bash
# Written in session 13 for the next one (issue 16; not yet run): the profiles that say where the
# two unmet goals stand, in one call (≈ 4 minutes; carry bins/libs/fixtures of scripts/device/pack.sh).
#  1 the 8B attention transfer with per-stage times of the hybrid layers (`--profile`; no stage
#    profile of it since session 3: the goal is 5 min / 10 M tokens = 123 ms a 4K sequence);
#  2 batch-1 8B decode (the row BENCHMARKS.md session 10 reports), then Nsight Compute of one
#    hybrid decode kernel (20 µs a layer on 32 blocks: which phase of its chain waits) and of
#    the one-row GEMVs (qkv / o / down stream at 2.9–3.3 TB/s against 3.8–4.0 for gate_up and
#    lm_head: ramp and tail), full sections and per-instruction samples.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r
T1="taskset -c 0-7"
# The GDN binary plainly (its PersistentLongSegments test has not run on its own on the GPU).
$T1 timeout 150 /tmp/bins/test_gated_delta_cuda --gtest_brief=1 > /tmp/r/gdn_tests.txt 2>&1
echo "test_gated_delta_cuda exit $? at $(el) s" >> $R; tail -5 /tmp/r/gdn_tests.txt >> $R
CFG=bench/configs/llama-3.1-8b.json
$T1 timeout 150 $G bench --transfer --config $CFG --seq-len 4096 --steps 8 --profile > /tmp/r/transfer.txt 2>&1
echo "transfer exit $? at $(el) s" >> $R; grep -iE "tokens/s|min|stage|ms" /tmp/r/transfer.txt | head -60 >> $R
$T1 timeout 120 $G bench --config $CFG --batches 1 --contexts 4096 --decode-repeats 20 > /tmp/r/decode.txt 2>&1
echo "decode exit $? at $(el) s" >> $R; grep -E "decode|ms" /tmp/r/decode.txt | head -12 >> $R
NCU=/usr/local/cuda/bin/ncu
FULL="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats --section SourceCounters"
for k in hdec:hybrid_decode_kernel:1 gemv:gemv_kernel:6; do
  IFS=: read n re c <<< "$k"
  $T1 timeout 120 $NCU --clock-control none --graph-profiling node $FULL -k "regex:$re" -c $c -o /tmp/r/$n \
    $G bench --config $CFG --batches 1 --contexts 4096 --decode-repeats 1 > /dev/null 2> /tmp/r/ncu_err_$n.txt
  echo "ncu $n exit $? at $(el) s" >> $R
  $NCU --import /tmp/r/$n.ncu-rep --page details --print-units base > /tmp/r/det_$n.txt 2>&1
  $NCU --import /tmp/r/$n.ncu-rep --page source --csv --print-units base > /tmp/r/src_$n.csv 2>&1
  grep -E "^  [a-z_]+.*\(|^    Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Warp Cycles Per Issued" /tmp/r/det_$n.txt | head -40 >> $R
done
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
