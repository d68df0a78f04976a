#!/bin/bash
# Session 7, call 3: hybrid decode with L2 prefetch (b) against without (a): tests, A/B batched
# decode; KV decode (main) beside SDPA; issue 14's new default (--window-by sensitivity) on the
# GPU and its val ppl; ncu of (b); compute-sanitizer on the batched decode tests.
cd "$(dirname "$0")/.."
source scripts/device/setup.sh
for t in test_model_cuda test_mixers_cuda test_runtime_cuda test_attention_cuda; do
  echo "== $t" >> $OUT/logs.txt; timeout 100 /tmp/bins/$t >> $OUT/logs.txt 2>&1; echo "$t exit $? at $(el) s" >> $R
done
grep -E "^\[  FAILED|^\[  PASSED|Failure" $OUT/logs.txt >> $R
for v in golinear_a golinear golinear_a golinear; do
  timeout 60 /tmp/bins/$v bench --config bench/configs/llama-3.1-8b.json --batches 32,64,128,256 --contexts 4096 --variants hybrid --decode-repeats 10 > /tmp/ab.md 2>> $OUT/logs.txt
  echo "== $v at $(el) s" >> $R; grep -E "^\| linearized" /tmp/ab.md >> $R
done
timeout 60 $G bench --mixers --contexts 4096,32768,131072 --seq 8192 --no-backward > $OUT/mixers.txt 2>&1; echo "mixers exit $? at $(el) s" >> $R
grep -iE "decode step" $OUT/mixers.txt >> $R
(unset LD_LIBRARY_PATH; OUT=$OUT timeout 60 python3 scripts/device/anchors_decode.py >> $R 2>&1); echo "anchors exit $? at $(el) s" >> $R
timeout 300 $G linearize models/tiny-llama3-25m --data carry2/train.jsonl.xz --device cuda --seq-len 2048 --batch 8 --seed 0 --tokens 4194304 --e2e-tokens 12582912 --adapter --out /tmp/default > $OUT/train.txt 2>&1; echo "default linearize exit $? at $(el) s" >> $R
timeout 60 $G eval ppl /tmp/default --input data/corpus_val.jsonl --seq-len 2048 --json --device cuda >> $R 2>> $OUT/train.txt; echo "eval exit $? at $(el) s" >> $R
grep -a "per-layer windows\|probe:" $OUT/train.txt >> $R
tar cJf $OUT/default.tar.xz -C /tmp default
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats"
timeout 60 /usr/local/cuda/bin/ncu --kernel-name regex:hybrid_decode_kernel --launch-skip 64 --launch-count 1 $S $G bench --config bench/configs/llama-3.1-8b.json --batches 256 --contexts 4096 --variants hybrid --decode-repeats 2 > $OUT/ncu.txt 2>&1; echo "ncu exit $? at $(el) s" >> $R
CS=/usr/local/cuda/bin/compute-sanitizer
cs() { [ $(el) -lt $5 ] || return; timeout $2 $CS --tool $1 /tmp/bins/$3 --gtest_filter="$4" > /tmp/cs.txt 2>&1; local rc=$?
  echo "$1 $3 [$4]: exit $rc, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/cs.txt | tail -1), $(grep -E '^\[  (PASSED|FAILED)' /tmp/cs.txt | tr '\n' ' '), $(el) s" >> $R; cat /tmp/cs.txt >> $OUT/cs.txt; }
cs memcheck 60 test_runtime_cuda '*' 480
cs memcheck 60 test_model_cuda '*Batch*:*Decode*:*Rope*:*KvCache*' 500
cs racecheck 50 test_model_cuda '*Batch*' 520
cs synccheck 40 test_model_cuda '*Batch*' 540
echo "total $(el) s" >> $R
