#!/bin/bash
# Session 7, call 2: issue 14's student as an adapter (windows by the probe's sensitivity, call 1),
# seed 0 then 1; the patched decode kernels timed beside SDPA; concurrency table; serve --device cuda
# under golinear_serve_load; ncu of the hybrid decode kernel.
cd "$(dirname "$0")/.."
source scripts/device/setup.sh
L="--data carry2/train.jsonl.xz --device cuda --stage both --seq-len 2048 --batch 8 --window-by carry2/s7_sens_summary.json --tokens 4194304 --e2e-tokens 12582912 --adapter"
timeout 150 $G linearize models/tiny-llama3-25m $L --seed 0 --out /tmp/s0 > $OUT/train.txt 2>&1; echo "seed0 exit $? at $(el) s" >> $R
timeout 60 $G eval ppl /tmp/s0 --input data/corpus_val.jsonl --seq-len 2048 --json --device cuda >> $R 2>> $OUT/train.txt; echo "eval0 exit $? at $(el) s" >> $R
tar cJf $OUT/students.tar.xz -C /tmp s0
timeout 60 $G bench --mixers --contexts 4096,32768,131072 --seq 8192 --no-backward > $OUT/mixers.txt 2>&1; echo "mixers exit $? at $(el) s" >> $R
grep -iE "decode step" $OUT/mixers.txt >> $R
(unset LD_LIBRARY_PATH; OUT=$OUT timeout 60 python3 scripts/device/anchors_decode.py >> $R 2>&1); echo "anchors exit $? at $(el) s" >> $R
timeout 150 $G bench --config bench/configs/llama-3.1-8b.json --batches 1,8,16,24,31,32,64,128,256 --contexts 32768,131072 --decode-repeats 10 > $OUT/batch.md 2>> $OUT/logs.txt; echo "batch bench exit $? at $(el) s" >> $R
grep -E "^\|" $OUT/batch.md | grep -v "out of memory" >> $R
for m in models/tiny-llama3-25m-linear models/tiny-llama3-25m; do serve_load $m 256 1024; done
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats"
timeout 90 /usr/local/cuda/bin/ncu --kernel-name regex:hybrid_decode_kernel --launch-skip 64 --launch-count 1 $S $G bench --config bench/configs/llama-3.1-8b.json --batches 256 --contexts 4096 --variants hybrid --decode-repeats 2 > $OUT/ncu.txt 2>&1; echo "ncu hybrid exit $? at $(el) s" >> $R
if [ $(el) -lt 440 ]; then
  timeout 150 $G linearize models/tiny-llama3-25m $L --seed 1 --out /tmp/s1 >> $OUT/train.txt 2>&1; echo "seed1 exit $? at $(el) s" >> $R
  timeout 60 $G eval ppl /tmp/s1 --input data/corpus_val.jsonl --seq-len 2048 --json --device cuda >> $R 2>> $OUT/train.txt; echo "eval1 exit $? at $(el) s" >> $R
fi
echo "total $(el) s" >> $R
