#!/bin/bash
# Session 9: GPU snapshots into pooled pinned buffers, copied on a second stream (issue 15). The
# GPU tests of the slots and the model (the new SnapshotsOverlapDecodingAndRestoreBitForBit
# among them, also under compute-sanitizer memcheck); then `golinear serve` of session 8 call 4's
# 8B-shaped linearized checkpoint under the same burst (256 streams, greedy) with the prompt cache
# on (the default budget, and 4,096) and off: session 8 measured 1,640 / 1,504 / 5,029 tok/s,
# the snapshots (≈ 60 ms each) making the difference. The server's prompt-cache counters follow
# each run.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
for t in test_runtime_cuda test_model_cuda; do
  echo "== $t" >> $OUT/tests.txt; timeout 100 /tmp/bins/$t >> $OUT/tests.txt 2>&1; echo "$t exit $? at $(el) s" >> $R
done
echo "== memcheck" >> $OUT/tests.txt
timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool memcheck /tmp/bins/test_runtime_cuda \
  --gtest_filter='GpuSequenceSlots.Snapshots*' >> $OUT/tests.txt 2>&1; echo "memcheck exit $? at $(el) s" >> $R
grep -E "^\[  FAILED|^\[  PASSED|Failure|ERROR SUMMARY" $OUT/tests.txt >> $R
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
  curl -s http://127.0.0.1:8090/metrics 2>/dev/null | grep -E "^golinear_(prompt_cache|prompt_tokens)" >> $R
  kill -TERM $sp; wait $sp
}
serve8b "default (prefill budget 512, prompt cache on)"
serve8b "prefill budget 4096, prompt cache on" --prefill-chunk 4096
serve8b "prefill budget 4096, no prompt cache" --prefill-chunk 4096 --cache-ram 0
echo "total $(el) s" >> $R
