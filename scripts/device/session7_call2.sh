#!/bin/bash
# Session 7, call 2: issue 14's student as an adapter (windows by the probe's sensitivity, call 1),
# seed 0 then 1; the patched decode kernels timed beside SDPA; concurrency table; serve --device cuda
# under golinear_serve_load; ncu of the hybrid decode kernel.
cd "$(dirname "$0")/.."
T0=$(date +%s)
mkdir -p /tmp/lib /work && tar xJf carry2/libs.tar.xz -C /tmp && cp /tmp/libs/* /tmp/lib/
tar xJf carry2/bins.tar.xz -C /tmp
tar xJf carry2/model.tar.xz -C .
ln -sfn "$PWD" /work/main
export LD_LIBRARY_PATH=/tmp/lib:/usr/local/cuda/lib64
R=$OUT/results.txt; G=/tmp/bins/golinear
el() { echo $(( $(date +%s) - T0 )); }
echo "setup $(el) s" > $R
L="--data carry2/train.jsonl.xz --device cuda --stage both --seq-len 2048 --batch 8 --window-by carry2/s7_sens_summary.json --tokens 4194304 --e2e-tokens 12582912 --adapter"
timeout 150 $G linearize models/tiny-llama3-25m $L --seed 0 --out /tmp/s0 > $OUT/train.txt 2>&1; echo "seed0 exit $? at $(el) s" >> $R
timeout 60 $G eval ppl /tmp/s0 --input data/corpus_val.jsonl --seq-len 2048 --json --device cuda >> $R 2>> $OUT/train.txt; echo "eval0 exit $? at $(el) s" >> $R
tar cJf $OUT/students.tar.xz -C /tmp s0
timeout 60 $G bench --mixers --contexts 4096,32768,131072 --seq 8192 --no-backward > $OUT/mixers.txt 2>&1; echo "mixers exit $? at $(el) s" >> $R
grep -iE "decode step" $OUT/mixers.txt >> $R
(unset LD_LIBRARY_PATH; OUT=$OUT timeout 60 python3 scripts/device/anchors_decode.py >> $R 2>&1); echo "anchors exit $? at $(el) s" >> $R
timeout 150 $G bench --config bench/configs/llama-3.1-8b.json --batches 1,8,16,24,31,32,64,128,256 --contexts 32768,131072 --decode-repeats 10 > $OUT/batch.md 2>> $OUT/logs.txt; echo "batch bench exit $? at $(el) s" >> $R
grep -E "^\|" $OUT/batch.md | grep -v "out of memory" >> $R
health() { for i in $(seq 1 60); do python3 -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$1/health').status == 200 else 1)" 2>/dev/null && return 0; sleep 1; done; return 1; }
for m in models/tiny-llama3-25m-linear models/tiny-llama3-25m; do
  $G serve $m --device cuda --parallel 64 --port 8090 >> $OUT/logs.txt 2>&1 &
  sp=$!
  health 8090 || echo "server $m not healthy" >> $R
  for P in 256 1024; do
    timeout 60 /tmp/bins/golinear_serve_load http://127.0.0.1:8090 --concurrency 64 --requests 2 --max-tokens 128 --prompt-tokens $P >> $R 2>&1; echo "load $m P=$P exit $? at $(el) s" >> $R
  done
  kill -TERM $sp; wait $sp; echo "serve $m exit $?" >> $R
done
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats"
timeout 90 /usr/local/cuda/bin/ncu --kernel-name regex:hybrid_decode_kernel --launch-skip 64 --launch-count 1 $S $G bench --config bench/configs/llama-3.1-8b.json --batches 256 --contexts 4096 --variants hybrid --decode-repeats 2 > $OUT/ncu.txt 2>&1; echo "ncu hybrid exit $? at $(el) s" >> $R
if [ $(el) -lt 440 ]; then
  timeout 150 $G linearize models/tiny-llama3-25m $L --seed 1 --out /tmp/s1 >> $OUT/train.txt 2>&1; echo "seed1 exit $? at $(el) s" >> $R
  timeout 60 $G eval ppl /tmp/s1 --input data/corpus_val.jsonl --seq-len 2048 --json --device cuda >> $R 2>> $OUT/train.txt; echo "eval1 exit $? at $(el) s" >> $R
fi
echo "total $(el) s" >> $R
