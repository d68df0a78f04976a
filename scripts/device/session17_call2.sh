#!/bin/bash
# Session 17, call 2 (carry: bins.tar.xz = main's binaries at bc124fd): where the GDN forward's
# time goes at 16K and 32K. Every kernel of `bench --mixers --no-backward` (kernel_timeline) with
# the pipeline off (--gdn-segments 1: the prepares on the whole GPU, then the state pass alone)
# and with the default (the persistent pass beside the per-segment prepares); Nsight Compute of
# the prepare and state-pass kernels at 16K (pipeline off) with per-instruction counters; the
# SM clock and power during a `bench --mixers` run at 8K-32K (nvidia-smi, where it exists).
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
gdn_timelines main $G
SMI=$(command -v nvidia-smi); echo "nvidia-smi: $SMI" >> $R
if [ -n "$SMI" ]; then
  $SMI --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 50 > /tmp/r/smi.txt 2>&1 &
  SP=$!; sleep 1
  $T1 timeout 100 $G bench --mixers --seq 8192,16384,32768 --contexts 4096 > /tmp/r/m_smi.txt 2>&1
  echo "mixers under smi exit $? at $(el) s" >> $R
  sleep 1; kill $SP
  awk -F, 'NR > 1 {print $2, $4}' /tmp/r/smi.txt | sort | uniq -c | sort -rn | head -12 >> $R
fi
ncu_profile gdn "gdn_prepare_kernel|gdn_state_pass_kernel" 2 \
  $G bench --mixers --seq 16384 --contexts 4096 --repeats 1 --warmups 0 --no-backward --gdn-segments 1
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
