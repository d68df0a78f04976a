#!/bin/bash
# Session 10, call 5: the final build (main at the end of the session): every GPU test binary,
# then the attention rows beside SDPA and the 8B decode rows against session 9's binary in the
# same call (docs/BENCHMARKS.md, session 10). Outputs but results.txt in $OUT/r.tar.xz.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r /tmp/s9 && tar xJf carry2/s9bin.tar.xz -C /tmp/s9; S9=/tmp/s9/s9bin/golinear
T1="taskset -c 0-7"
for t in test_attention_cuda test_kernels_cuda test_ops_cuda test_gated_delta_cuda test_gated_linear_cuda \
         test_mixers_cuda test_model_cuda test_runtime_cuda test_eval_cuda test_analysis_cuda test_train_cuda; do
  echo "== $t" >> /tmp/r/tests.txt; $T1 timeout 100 /tmp/bins/$t >> /tmp/r/tests.txt 2>&1; echo "$t exit $? at $(el) s" >> $R
done
grep -E "^\[  FAILED|^\[  PASSED" /tmp/r/tests.txt | head -30 >> $R
$T1 timeout 100 $G bench --mixers --seq 8192,16384,32768 --contexts 4096 > /tmp/r/mixers.txt 2>&1; echo "mixers exit $? at $(el) s" >> $R
grep -E 'full attention \(ours, wgmma' /tmp/r/mixers.txt >> $R
(unset LD_LIBRARY_PATH; $T1 timeout 90 python3 scripts/device/anchors_attention.py >> $R 2>&1); echo "anchors exit $? at $(el) s" >> $R
for b in "final:$G" "s9:$S9"; do
  $T1 timeout 60 ${b#*:} bench --config bench/configs/llama-3.1-8b.json --batches 1,4 --contexts 4096 --decode-repeats 20 > /tmp/r/dec_${b%%:*}.txt 2>&1
  echo "decode ${b%%:*} exit $? at $(el) s: $(grep -E '^bench: ' /tmp/r/dec_${b%%:*}.txt | sed -E 's/.*(hybrid|full) N=([0-9]+) B=([0-9]+) step ([0-9.]+) ms.*/\1 B=\3 \4 ms/' | tr '\n' ';')" >> $R
done
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
