#!/bin/bash
# Session 17, call 2 (carry: bins.tar.xz = main's binaries at bc124fd): where the GDN forward's
# time goes at 16K and 32K. Every kernel of `bench --mixers --no-backward` (kernel_timeline) with
# the pipeline off (--gdn-segments 1: the prepares on the whole GPU, then the state pass alone)
# and with the default (the persistent pass beside the per-segment prepares); Nsight Compute of
# the prepare and state-pass kernels at 16K (pipeline off) with per-instruction counters; the
# SM clock and power during a `bench --mixers` run at 8K-32K (nvidia-smi, where it exists).
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
for m in seg1 default; do
  opt=""; [ $m = seg1 ] && opt="--gdn-segments 1"
  KERNEL_TIMELINE_ALL=1 CUDA_INJECTION64_PATH=/tmp/lib/libkernel_timeline.so KERNEL_TIMELINE_OUT=/tmp/r/tl_$m.txt \
    $T1 timeout 100 $G bench --mixers --seq 16384,32768 --contexts 4096 --no-backward $opt > /tmp/r/m_$m.txt 2>&1
  echo "timeline $m exit $? at $(el) s" >> $R
  grep -E "gdn" /tmp/r/tl_$m.txt >> $R; grep -E "gated deltanet|hybrid \(gdn" /tmp/r/m_$m.txt | cut -c1-100 >> $R
done
SMI=$(command -v nvidia-smi); echo "nvidia-smi: $SMI" >> $R
if [ -n "$SMI" ]; then
  $SMI --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 50 > /tmp/r/smi.txt 2>&1 &
  SP=$!; sleep 1
  $T1 timeout 100 $G bench --mixers --seq 8192,16384,32768 --contexts 4096 > /tmp/r/m_smi.txt 2>&1
  echo "mixers under smi exit $? at $(el) s" >> $R
  sleep 1; kill $SP
  awk -F, 'NR > 1 {print $2, $4}' /tmp/r/smi.txt | sort | uniq -c | sort -rn | head -12 >> $R
fi
NCU=/usr/local/cuda/bin/ncu
FULL="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats --section SourceCounters"
$T1 timeout 120 $NCU --clock-control none $FULL -k "regex:gdn_prepare_kernel|gdn_state_pass_kernel" -c 2 -f -o /tmp/r/gdn $G bench --mixers --seq 16384 --contexts 4096 --repeats 1 --warmups 0 --no-backward --gdn-segments 1 > /tmp/r/ncu_run.txt 2>&1
echo "ncu gdn exit $? at $(el) s" >> $R
$NCU --import /tmp/r/gdn.ncu-rep --page details --print-units base > /tmp/r/det_gdn.txt 2>&1
$NCU --import /tmp/r/gdn.ncu-rep --page source --csv --print-units base > /tmp/r/src_gdn.csv 2>&1
grep -E "gdn_|Duration|Throughput|Issued Ipc|Eligible Warps|Achieved Occupancy|Registers" /tmp/r/det_gdn.txt | head -40 >> $R
rm -f /tmp/r/*.ncu-rep
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
