#!/bin/bash
# Session 8, call 3: main with the kernels chosen in call 2 (hybrid decode variant c, KV decode
# variant b), batched greedy eval and the greedy argmax-only decode step: every GPU test binary;
# decode against concurrency at 32K (linearized and full attention, for issue 15's ratio) and the
# KV decode rows beside SDPA; an 8B-shaped checkpoint: NIAH with 32 samples at batch 1 and 32, and
# `golinear serve` under load through HTTP at 64 and 256 streams (greedy and sampled); then
# compute-sanitizer on the two new kernels' tests.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
for t in test_kernels_cuda test_ops_cuda test_gated_delta_cuda test_gated_linear_cuda test_attention_cuda \
         test_mixers_cuda test_model_cuda test_runtime_cuda test_eval_cuda test_analysis_cuda test_train_cuda; do
  echo "== $t" >> $OUT/tests.txt; timeout 150 /tmp/bins/$t >> $OUT/tests.txt 2>&1; echo "$t exit $? at $(el) s" >> $R
done
grep -E "^\[  FAILED|^\[  PASSED|Failure|GpuBatchGenerate|packed against" $OUT/tests.txt >> $R
B8="--config bench/configs/llama-3.1-8b.json"
timeout 150 $G bench $B8 --batches 1,8,16,24,32,64,128,256 --contexts 32768 --decode-repeats 10 > $OUT/batch.md 2>&1; echo "batch exit $? at $(el) s" >> $R
grep -E "^\|" $OUT/batch.md >> $R
timeout 60 $G bench $B8 --batches 256 --contexts 4096 --variants hybrid --decode-repeats 10 > /tmp/b.md 2>&1; grep -E "^\| linearized" /tmp/b.md >> $R
timeout 90 $G bench --mixers --contexts 4096,32768,131072 --seq 8192 --no-backward > $OUT/mixers.txt 2>&1; echo "mixers exit $? at $(el) s" >> $R
grep -iE "decode step" $OUT/mixers.txt >> $R
timeout 60 python3 scripts/device/anchors_decode.py >> $R 2>&1
mkdir -p /tmp/tok && tar xJf carry2/llama3tok.tar.xz -C /tmp/tok
W=/tmp/w8; mkdir -p $W
t=$(el); timeout 120 $G random-checkpoint $B8 --tokenizer /tmp/tok/llama3/tokenizer.json --out $W/base > /dev/null 2>> $OUT/logs.txt; echo "checkpoint exit $? $(( $(el) - t )) s" >> $R
t=$(el); timeout 150 $G linearize $W/base --data data/corpus_train_sample.jsonl.xz --out $W/lin --device cuda --stage transfer --seq-len 4096 --tokens 65536 --window-by none --adapter >> $OUT/logs.txt 2>&1; echo "linearize exit $? $(( $(el) - t )) s" >> $R
for b in 1 32; do
  t=$(el); timeout 120 $G eval niah $W/lin --length 4096 --samples 32 --batch $b --device cuda --json > $OUT/niah_$b.json 2>> $OUT/logs.txt
  echo "8B niah 32 samples at 4K, batch $b: exit $? $(( $(el) - t )) s" >> $R
done
$G serve $W/lin --device cuda --parallel 256 --port 8090 >> $OUT/logs.txt 2>&1 &
sp=$!
health 8090 || echo "8B server not healthy" >> $R
for run in "64 0" "256 0" "256 0.8"; do
  set -- $run
  timeout 60 /tmp/bins/golinear_serve_load http://127.0.0.1:8090 --concurrency $1 --requests 1 --max-tokens 128 --prompt-tokens 256 --temperature $2 >> $R 2>&1
  echo "8B load C=$1 T=$2 exit $? at $(el) s" >> $R
done
kill -TERM $sp; wait $sp; echo "8B serve exit $?" >> $R
CS=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck; do
  timeout 120 $CS --tool $tool /tmp/bins/test_kernels_cuda --gtest_filter='CudaAttention.Decode*' > /tmp/cs.txt 2>&1
  echo "$tool test_kernels_cuda [Decode*]: exit $?, $(grep -E 'SUMMARY' /tmp/cs.txt | tail -1), $(el) s" >> $R
  timeout 150 $CS --tool $tool /tmp/bins/test_model_cuda --gtest_filter='*Batch*:*Graph*' > /tmp/cs.txt 2>&1
  echo "$tool test_model_cuda [Batch, Graph]: exit $?, $(grep -E 'SUMMARY' /tmp/cs.txt | tail -1), $(el) s" >> $R
done
echo "total $(el) s" >> $R
