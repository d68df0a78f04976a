#!/bin/bash
# Session 8, call 4: the packed prefill of several empty slots (gpu_prefill_batch, the server's
# prefill_batch) under the GPU tests of every forward path; then `golinear serve` of an 8B-shaped
# linearized checkpoint under load through HTTP (256 streams, greedy): the default prefill budget,
# a larger one, and without the prompt cache's snapshots; the bundled model at 64 streams.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
for t in test_runtime_cuda test_model_cuda test_eval_cuda test_analysis_cuda test_train_cuda; do
  echo "== $t" >> $OUT/tests.txt; timeout 100 /tmp/bins/$t >> $OUT/tests.txt 2>&1; echo "$t exit $? at $(el) s" >> $R
done
grep -E "^\[  FAILED|^\[  PASSED|Failure" $OUT/tests.txt >> $R
mkdir -p /tmp/tok && tar xJf carry2/llama3tok.tar.xz -C /tmp/tok
W=/tmp/w8; mkdir -p $W
t=$(el); timeout 100 $G random-checkpoint --config bench/configs/llama-3.1-8b.json --tokenizer /tmp/tok/llama3/tokenizer.json --out $W/base > /dev/null 2>> $OUT/logs.txt; echo "checkpoint exit $? $(( $(el) - t )) s" >> $R
t=$(el); timeout 100 $G linearize $W/base --data data/corpus_train_sample.jsonl.xz --out $W/lin --device cuda --stage transfer --seq-len 4096 --tokens 65536 --window-by none --adapter >> $OUT/logs.txt 2>&1; echo "linearize exit $? $(( $(el) - t )) s" >> $R
serve8b() {  # label, serve options...
  local label=$1; shift
  $G serve $W/lin --device cuda --parallel 256 --port 8090 "$@" >> $OUT/logs.txt 2>&1 &
  local sp=$!
  health 8090 || echo "8B server ($label) not healthy" >> $R
  timeout 45 /tmp/bins/golinear_serve_load http://127.0.0.1:8090 --concurrency 256 --requests 1 --max-tokens 128 --prompt-tokens 256 --temperature 0 >> $R 2>&1
  echo "8B load C=256 greedy, $label: exit $? at $(el) s" >> $R
  kill -TERM $sp; wait $sp
}
serve8b "default (prefill budget 512, prompt cache on)"
serve8b "prefill budget 4096" --prefill-chunk 4096
serve8b "prefill budget 4096, no prompt cache" --prefill-chunk 4096 --cache-ram 0
serve_load models/tiny-llama3-25m-linear 256
echo "total $(el) s" >> $R
