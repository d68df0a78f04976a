#!/bin/bash
# Session 17, call 5 (carry: bins.tar.xz = main's binaries at bc124fd): is full attention at
# 16K-32K held by the power cap, and does SDPA (cuDNN) run at higher clocks under it?
# nvidia-smi (SM clock, power, clock event reasons; 50 ms) during golinear's `bench --mixers`
# at 32K and during SDPA's fwd and fwd+bwd at 8K-32K (anchors_attention.py); then Nsight Compute
# (no clock control: boost) of cuDNN's fprop/bprop and of golinear's forward, dq and dk/dv at 16K,
# each kernel alone (duration, instructions issued, tensor-pipe activity).
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
SMI=/usr/local/nvidia/bin/nvidia-smi
smi_during() {  # NAME COMMAND...: clocks during COMMAND into /tmp/r/smi_NAME.txt, a summary into $R
  local n=$1; shift
  $SMI --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 50 > /tmp/r/smi_$n.txt 2>&1 &
  local sp=$!; sleep 1
  "$@" > /tmp/r/run_$n.txt 2>&1; echo "$n exit $? at $(el) s" >> $R
  sleep 1; kill $sp; wait $sp 2>/dev/null
  awk -F, '{gsub(/ MHz| W/, ""); if ($3 > 400) { n++; s += $2; if (min == "" || $2 < min) min = $2 } } END { printf "  samples over 400 W: %d, mean SM clock %.0f MHz, min %d MHz\n", n, n ? s / n : 0, min }' /tmp/r/smi_$n.txt >> $R
}
smi_during ours $T1 $G bench --mixers --seq 32768 --contexts 4096
grep -E "full attention \(ours" /tmp/r/run_ours.txt | cut -c1-100 >> $R
smi_during sdpa env -u LD_LIBRARY_PATH $T1 python3 scripts/device/anchors_attention.py
grep -E "^\{" /tmp/r/run_sdpa.txt >> $R
MET="--section SpeedOfLight --section InstructionStats --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second"
(unset LD_LIBRARY_PATH; $T1 timeout 120 $NCU --clock-control none $MET -k "regex:cudnn|flash|fmha" -c 2 -f -o /tmp/r/sdpa python3 scripts/device/sdpa_once.py 16384 > /tmp/r/ncu_sdpa_run.txt 2>&1; echo "ncu sdpa exit $? at $(el) s" >> $R
 $NCU --import /tmp/r/sdpa.ncu-rep --page details --print-units base > /tmp/r/det_sdpa.txt 2>&1)
$T1 timeout 120 $NCU --clock-control none $MET -k "regex:flash_.*wgmma" -c 3 -f -o /tmp/r/ours $G bench --mixers --seq 16384 --contexts 4096 --repeats 1 --warmups 0 > /tmp/r/ncu_ours_run.txt 2>&1; echo "ncu ours exit $? at $(el) s" >> $R
$NCU --import /tmp/r/ours.ncu-rep --page details --print-units base > /tmp/r/det_ours.txt 2>&1
for f in sdpa ours; do
  grep -E "^  [a-zA-Z_].*\(|Duration|Executed Instructions  |gmma_cycles|cycles_elapsed" /tmp/r/det_$f.txt | sed "s/^/$f /" | cut -c1-160 >> $R
done
rm -f /tmp/r/*.ncu-rep
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
