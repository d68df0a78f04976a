#!/bin/bash
# Prepared in session 9 for the next one (issue 16, not run yet): Nsight Compute profiles of what
# stands between golinear and its goals, written to $OUT as .ncu-rep files (open them here with
# `ncu --import FILE --page details`) and as text summaries in $OUT/results.txt.
#   1. the wgmma attention kernels at 8K (forward, dq, dk/dv): where the backward's ≈ 2× SDPA goes
#      and why the forward stays 2–13% short (BENCHMARKS.md session 9);
#   2. one batch-1 decode step of the 8B-shaped model, every kernel of its graph (5.54 ms against
#      a weight-read bound of ≈ 3.3 ms).
# ncu needs --clock-control none here (device/H200.md); nsys is not on that machine.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "no ncu" >> $R; exit 0; }
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats"
for k in flash_forward_wgmma flash_backward_dq_wgmma flash_backward_dkdv_wgmma; do
  timeout 150 $NCU --clock-control none $SECTIONS -k "regex:$k" -c 1 -o $OUT/$k \
    $G bench --mixers --seq 8192 --contexts 4096 --repeats 1 --warmups 0 > /tmp/ncu_$k.txt 2>&1
  echo "ncu $k exit $? at $(el) s" >> $R
  $NCU --import $OUT/$k.ncu-rep --page details --print-units base 2>/dev/null | \
    grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|No Eligible|Stall|Registers Per|Achieved Occupancy" | head -30 | sed "s/^/  $k /" >> $R
done
# One decode step at B = 1: the graph's kernels one by one (sorted by duration in the summary).
timeout 200 $NCU --clock-control none --graph-profiling node --section SpeedOfLight -o $OUT/decode_b1 \
  $G bench --config bench/configs/llama-3.1-8b.json --batches 1 --contexts 4096 --decode-repeats 1 > /tmp/ncu_dec.txt 2>&1
echo "ncu decode exit $? at $(el) s" >> $R
$NCU --import $OUT/decode_b1.ncu-rep --page raw --csv --metrics gpu__time_duration.sum 2>/dev/null | \
  awk -F'","' 'NR > 2 {gsub(/"/, "", $NF); t[$5] += $NF; n[$5]++} END {for (k in t) printf "%12.0f ns %5d  %s\n", t[k], n[k], k}' | \
  sort -rn | head -25 >> $R
echo "total $(el) s" >> $R
