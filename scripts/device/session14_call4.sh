#!/bin/bash
# Session 14, call 4 (issue 16; carry: pack.sh of main with the mixing kernels' rows of four and
# the 1,024-thread head sums; carry2/base.tar.xz = call 1's golinear as golinear_base and call
# 2's as golinear_mid):
#  1 the GPU tests of the changed kernels, plainly (test_mixers_cuda, test_train_cuda, test_ops_cuda);
#  2 the 8B transfer: base, mid (the forward kept for the GDN backward) and new, alternated twice;
#  3 ncu durations of the changed kernels (mix backward, mix NMSE sums, gates backward);
#  4 where the GDN backward's chunk-gradient kernel (881 µs of a student layer's ~2.3 ms at
#    T = 4096, 43 TFLOP/s) and the sink blocks' dk/dv kernel (119 µs on 64 blocks) wait: Nsight
#    Compute's warp states and per-line samples.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r
tar xJf carry2/base.tar.xz -C /tmp
NCU=/usr/local/cuda/bin/ncu
CFG=bench/configs/llama-3.1-8b.json
T1="taskset -c 0-7"
plain_tests test_mixers_cuda test_train_cuda test_ops_cuda
transfer_ab base:/tmp/bins/golinear_base mid:/tmp/bins/golinear_mid new:$G
for b in mid:/tmp/bins/golinear_mid new:$G; do
  $T1 timeout 100 $NCU --clock-control none --metrics gpu__time_duration.sum -k "regex:mix_|gates_backward" -c 3 --csv \
    ${b#*:} bench --transfer --config $CFG --seq-len 4096 --steps 1 --no-pipeline 2>/dev/null | grep -E "gpu__time" | awk -F'","' '{print $5, $NF}' | cut -c1-120 > /tmp/r/ncu_mix_${b%%:*}.txt
  sed "s/^/${b%%:*}: /" /tmp/r/ncu_mix_${b%%:*}.txt >> $R
done
FULL="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats --section SourceCounters"
for k in grad:gdn_chunk_grad_kernel:1 dkdv:backward_dkdv_kernel:2; do
  IFS=: read n re c <<< "$k"
  taskset -c 0-7 timeout 200 $NCU --clock-control none $FULL -k "regex:$re" -c $c -f -o /tmp/r/$n \
    $G bench --transfer --config $CFG --seq-len 4096 --steps 1 --no-pipeline > /dev/null 2> /tmp/r/ncu_err_$n.txt
  echo "ncu $n exit $? at $(el) s" >> $R
  $NCU --import /tmp/r/$n.ncu-rep --page details --print-units base > /tmp/r/det_$n.txt 2>&1
  $NCU --import /tmp/r/$n.ncu-rep --page source --csv --print-units base > /tmp/r/src_$n.csv 2>&1
  grep -E "Duration|Throughput|Warp Cycles Per Issued|Issue Slots Busy|Stall|Achieved Occupancy" /tmp/r/det_$n.txt | head -40 >> $R
done
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
