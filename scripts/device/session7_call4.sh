#!/bin/bash
# Session 7, call 4: the hybrid decode kernel with 16 warps per block (golinear) against 8
# (golinear_w8s, main): tests, A/B; issue 14's default linearize on the GPU (main's binary) and
# its val ppl; serve --device cuda under golinear_serve_load with the O(V) sampler (main's binary).
cd "$(dirname "$0")/.."
source scripts/device/setup.sh
G=/tmp/bins/golinear_w8s
for t in test_model_cuda test_mixers_cuda test_runtime_cuda; do
  echo "== $t" >> $OUT/logs.txt; timeout 100 /tmp/bins/$t >> $OUT/logs.txt 2>&1; echo "$t exit $? at $(el) s" >> $R
done
grep -E "^\[  FAILED|^\[  PASSED|Failure" $OUT/logs.txt >> $R
for v in golinear_w8s golinear golinear_w8s golinear; do
  timeout 60 /tmp/bins/$v bench --config bench/configs/llama-3.1-8b.json --batches 64,128,256 --contexts 4096 --variants hybrid --decode-repeats 10 > /tmp/ab.md 2>> $OUT/logs.txt
  echo "== $v at $(el) s" >> $R; grep -E "^\| linearized" /tmp/ab.md >> $R
done
timeout 330 $G linearize models/tiny-llama3-25m --data carry2/train.jsonl.xz --device cuda --seq-len 2048 --batch 8 --seed 0 --tokens 4194304 --e2e-tokens 12582912 --adapter --out /tmp/default > $OUT/train.txt 2>&1; echo "default linearize exit $? at $(el) s" >> $R
timeout 60 $G eval ppl /tmp/default --input data/corpus_val.jsonl --seq-len 2048 --json --device cuda >> $R 2>> $OUT/train.txt; echo "eval exit $? at $(el) s" >> $R
grep -a "per-layer windows\|probe:" $OUT/train.txt >> $R
tar cJf $OUT/default.tar.xz -C /tmp default
for m in models/tiny-llama3-25m-linear models/tiny-llama3-25m; do
  [ $(el) -lt 520 ] || break
  serve_load $m 256 1024
done
echo "total $(el) s" >> $R
