#!/bin/bash
# Session 14, call 3 (issue 16; carry: call 2's carry2): Nsight Compute of one hybrid layer's
# student kernels in the 8B attention transfer (T = 4096; under ncu the kernels run one at a
# time, so the teacher's stream no longer shares the GPU with them and each duration is its own):
# which kernels hold the students' ~160 ms per sequence.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r
NCU=/usr/local/cuda/bin/ncu
CFG=bench/configs/llama-3.1-8b.json
RE='conv_rope|unit_rows|rope_backward|rope_table|backward_prepare|backward_dq_kernel|backward_dkdv|backward_sink|gates_|head_sum|mix_|short_conv|gdn_|split_bf16|add_f32|nmse|flash_forward_kernel'
taskset -c 0-7 timeout 300 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
  -k "regex:$RE" -c 70 -f -o /tmp/r/layer $G bench --transfer --config $CFG --seq-len 4096 --steps 1 --no-pipeline > /tmp/r/ncu_out.txt 2>&1
echo "ncu exit $? at $(el) s" >> $R
$NCU --import /tmp/r/layer.ncu-rep --page details --print-units base > /tmp/r/layer_details.txt 2>&1
$NCU --import /tmp/r/layer.ncu-rep --page raw --csv --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed > /tmp/r/layer_raw.csv 2>&1
awk -F'","' 'NR > 2 {print $0}' /tmp/r/layer_raw.csv | cut -c1-400 | head -60 >> $R
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
