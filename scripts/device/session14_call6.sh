#!/bin/bash
# Session 14, call 6 (issue 16; carry: pack.sh of main with the sink keys' dk/dv in about 32
# chunks per kv head; carry2/base.tar.xz = golinear_c5 (call 5's binary) and golinear_vb16 (this
# tree with 16 value columns per block in the GDN backward's two sequential passes, the
# defaults 32)):
#  1 the attention, GDN, mixer and trainer GPU tests, plainly;
#  2 the 8B transfer, c5 / new / vb16 alternated twice;
#  3 ncu durations of one layer's sink + window backward and GDN sequential-pass kernels.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r
tar xJf carry2/base.tar.xz -C /tmp
NCU=/usr/local/cuda/bin/ncu
CFG=bench/configs/llama-3.1-8b.json
T1="taskset -c 0-7"
plain_tests test_attention_cuda test_gated_delta_cuda test_mixers_cuda test_train_cuda
transfer_ab c5:/tmp/bins/golinear_c5 new:$G vb16:/tmp/bins/golinear_vb16
for b in c5:/tmp/bins/golinear_c5 new:$G vb16:/tmp/bins/golinear_vb16; do
  $T1 timeout 100 $NCU --clock-control none --metrics gpu__time_duration.sum -k "regex:backward_dq|backward_dkdv|backward_sink|gdn_state_pass|gdn_reverse|gdn_chunk_grad" -c 7 --csv \
    ${b#*:} bench --transfer --config $CFG --seq-len 4096 --steps 1 --no-pipeline 2>/dev/null | grep -E "gpu__time" |
    awk -F'","' '{split($5, n, "("); print n[1], $9, $NF}' > /tmp/r/ncu_${b%%:*}.txt
  sed "s/^/${b%%:*}: /" /tmp/r/ncu_${b%%:*}.txt >> $R
done
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
