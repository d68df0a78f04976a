#!/bin/bash
# Session 7, call 1: decode-path GPU tests of the patched kernels; issue 14's clean chain
# (uniform probe -> layer sensitivity on training text -> windows by it, 17.3 M tokens -> val ppl);
# a first timing of the patched batched decode.
cd "$(dirname "$0")/.."
source scripts/device/setup.sh
for t in test_model_cuda test_runtime_cuda test_attention_cuda test_mixers_cuda; do
  echo "== $t" >> $OUT/tests.txt; timeout 100 /tmp/bins/$t >> $OUT/tests.txt 2>&1; echo "$t exit $? at $(el) s" >> $R
done
grep -E "^\[  FAILED|^\[  PASSED|Failure" $OUT/tests.txt >> $R
L="--data carry2/train.jsonl.xz --device cuda --stage both --seq-len 2048 --batch 8 --seed 0"
timeout 60 $G linearize models/tiny-llama3-25m $L --out /tmp/probe --window-by none --tokens 1048576 --e2e-tokens 524288 > $OUT/train.txt 2>&1; echo "probe exit $? at $(el) s" >> $R
timeout 150 $G analyze models/tiny-llama3-25m --student /tmp/probe --data data/corpus_train_sample.jsonl.xz --tokens 16384 --seq-len 1024 --sensitivity --out /tmp/sens >> $OUT/train.txt 2>&1; echo "sensitivity exit $? at $(el) s" >> $R
cp /tmp/sens/summary.json $OUT/sens_summary.json
timeout 330 $G linearize models/tiny-llama3-25m $L --out /tmp/final --window-by /tmp/sens/summary.json --tokens 4194304 --e2e-tokens 12582912 >> $OUT/train.txt 2>&1; echo "final exit $? at $(el) s" >> $R
timeout 60 $G eval ppl /tmp/final --input data/corpus_val.jsonl --seq-len 2048 --json --device cuda >> $R 2>> $OUT/train.txt; echo "eval exit $? at $(el) s" >> $R
tar cJf $OUT/students.tar.xz -C /tmp probe final sens final.partial 2>/dev/null
grep -E "window|NMSE|KL|tokens/s" $OUT/train.txt | tail -30 >> $R
timeout 60 $G bench --config bench/configs/llama-3.1-8b.json --batches 1,32,128,256 --contexts 4096 --variants hybrid --decode-repeats 10 > $OUT/batch.md 2>&1; echo "batch exit $? at $(el) s" >> $R
grep -E "^\|" $OUT/batch.md >> $R
echo "total $(el) s" >> $R
