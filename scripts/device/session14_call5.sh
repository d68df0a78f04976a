#!/bin/bash
# Session 14, call 5 (issue 16; carry: pack.sh of main with the chunk-gradient kernel on
# mma.sync + ldmatrix and dk/dv accumulated in registers; carry2/base.tar.xz = golinear_base
# (call 1), golinear_mid (call 2: the forward kept for the GDN backward), golinear_q (call 4:
# the mixing kernels' rows of four, 1,024-thread head sums)):
#  1 the GDN, mixer and trainer GPU tests, plainly;
#  2 the 8B transfer, the four binaries alternated twice;
#  3 ncu durations of one layer's GDN backward kernels, q against new.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r
tar xJf carry2/base.tar.xz -C /tmp
NCU=/usr/local/cuda/bin/ncu
CFG=bench/configs/llama-3.1-8b.json
T1="taskset -c 0-7"
plain_tests test_gated_delta_cuda test_mixers_cuda test_train_cuda
grep -E "^  (dq|dk|dv|dg|dbeta) " /tmp/r/test_gated_delta_cuda.txt | sort -k3 -g | tail -3 >> $R
transfer_ab base:/tmp/bins/golinear_base mid:/tmp/bins/golinear_mid q:/tmp/bins/golinear_q new:$G
for b in q:/tmp/bins/golinear_q new:$G; do
  $T1 timeout 100 $NCU --clock-control none --metrics gpu__time_duration.sum -k "regex:mix_|gates_backward|gdn_reverse|gdn_chunk_grad" -c 5 --csv \
    ${b#*:} bench --transfer --config $CFG --seq-len 4096 --steps 1 --no-pipeline 2>/dev/null | grep -E "gpu__time" |
    awk -F'","' '{split($5, n, "("); print n[1], $NF}' > /tmp/r/ncu_${b%%:*}.txt
  sed "s/^/${b%%:*}: /" /tmp/r/ncu_${b%%:*}.txt >> $R
done
$T1 timeout 100 $G bench --transfer --config $CFG --seq-len 4096 --steps 8 --profile > /tmp/r/transfer_profile.txt 2>&1
sed -n '/time per stage/,$p' /tmp/r/transfer_profile.txt >> $R
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
