#!/bin/bash
# Session 9, call 2: s9-int with the pingpong wgmma forward (FFMA softmax, the causal mask only on
# the diagonal tile) and the GEMV routed at M ≤ 2, N ≤ 16,384. Tests of the touched paths; the
# mixer table beside SDPA (and call 1's pingpong build, carry2/attnvar.tar.xz: pp); whole-model
# decode A/B main / s9 / s9 without programmatic dependent launch (carry2/gemvvar.tar.xz: nopdl),
# B = 1, 2, 4, two rounds; 8B attention transfer, main against s9; then session 8's 8B serve
# burst (256 streams) with the pinned-snapshot pool: s9 and main with the prompt cache on, s9 off.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
tar xJf carry2/main.tar.xz -C /tmp; tar xJf carry2/attnvar.tar.xz -C /tmp; tar xJf carry2/gemvvar.tar.xz -C /tmp
mkdir -p /tmp/fz && tar -xJf carry2/fuzzbins.tar.xz -C /tmp/fz && { bash /tmp/fz/fuzzbins/fuzz_background.sh START 510 8-15 /tmp/fz/run >> $R 2>&1; echo "fuzz started at $(el) s" >> $R; }
T1="taskset -c 0-7"
for t in test_attention_cuda test_kernels_cuda test_model_cuda test_runtime_cuda test_train_cuda; do
  echo "== $t" >> $OUT/tests.txt; $T1 timeout 90 /tmp/bins/$t >> $OUT/tests.txt 2>&1; echo "$t exit $? at $(el) s" >> $R
done
grep -E "^\[  FAILED|^\[  PASSED|Failure" $OUT/tests.txt | head -20 >> $R
$T1 timeout 120 $G bench --mixers --seq 8192,16384,32768 --contexts 4096 > $OUT/mixers.txt 2>&1; echo "mixers exit $? at $(el) s" >> $R
grep -iE "full attention" $OUT/mixers.txt | grep -v decode >> $R
$T1 timeout 60 /tmp/attnvar/pp/golinear bench --mixers --seq 8192,32768 --contexts 4096 --no-backward > /tmp/m.txt 2>&1
grep -iE "full attention" /tmp/m.txt | grep -v decode | sed "s/^/  pp (call 1) /" >> $R
(unset LD_LIBRARY_PATH; $T1 timeout 90 python3 scripts/device/anchors_attention.py >> $R 2>&1); echo "anchors exit $? at $(el) s" >> $R
BB="--config bench/configs/llama-3.1-8b.json --batches 1,2,4 --contexts 4096 --decode-repeats 10"
for round in 1 2; do
  for v in main s9 nopdl; do
    case $v in main) g=/tmp/main/golinear;; s9) g=$G;; nopdl) g=/tmp/gemvvar/nopdl/golinear;; esac
    $T1 timeout 60 $g bench $BB > /tmp/b.md 2>&1; echo "round $round $v exit $?:" >> $R
    grep -E '^\| linearized' /tmp/b.md | sed "s/^/  $v /" >> $R; cat /tmp/b.md >> $OUT/bench_decode.md
  done
done
echo "decode A/B done at $(el) s" >> $R
for v in s9 main; do
  g=$G; [ $v = main ] && g=/tmp/main/golinear
  $T1 timeout 100 $g bench --transfer --config bench/configs/llama-3.1-8b.json --seq-len 4096 --steps 24 > /tmp/tr.md 2>&1
  echo "transfer $v exit $? at $(el) s" >> $R; grep -E "tokens/s|min|^\|" /tmp/tr.md | head -8 | sed "s/^/  $v /" >> $R; cat /tmp/tr.md >> $OUT/transfer.md
done
mkdir -p /tmp/tok && tar xJf carry2/llama3tok.tar.xz -C /tmp/tok
W=/tmp/w8; mkdir -p $W
t=$(el); timeout 100 $G random-checkpoint --config bench/configs/llama-3.1-8b.json --tokenizer /tmp/tok/llama3/tokenizer.json --out $W/base > /dev/null 2>> $OUT/logs.txt; echo "checkpoint exit $? $(( $(el) - t )) s" >> $R
t=$(el); timeout 100 $G linearize $W/base --data data/corpus_train_sample.jsonl.xz --out $W/lin --device cuda --stage transfer --seq-len 4096 --tokens 65536 --window-by none --adapter >> $OUT/logs.txt 2>&1; echo "linearize exit $? $(( $(el) - t )) s" >> $R
serve8b() {  # label, binary, serve options...
  local label=$1 g=$2; shift 2
  [ $(el) -gt 530 ] && { echo "skipped $label (time)" >> $R; return; }
  $g serve $W/lin --device cuda --parallel 256 --port 8090 "$@" >> $OUT/logs.txt 2>&1 &
  local sp=$!
  health 8090 || echo "8B server ($label) not healthy" >> $R
  timeout 45 /tmp/bins/golinear_serve_load http://127.0.0.1:8090 --concurrency 256 --requests 1 --max-tokens 128 --prompt-tokens 256 --temperature 0 >> $R 2>&1
  echo "8B load C=256 greedy, $label: exit $? at $(el) s" >> $R
  curl -s http://127.0.0.1:8090/metrics 2>/dev/null | grep -E "^golinear_prompt_cache" >> $R
  kill -TERM $sp; wait $sp
}
serve8b "s9, prompt cache on (pinned snapshots)" $G
serve8b "main, prompt cache on" /tmp/main/golinear
serve8b "s9, no prompt cache" $G --cache-ram 0
bash /tmp/fz/fuzzbins/fuzz_background.sh COLLECT /tmp/fz/run >> $R 2>&1
echo "total $(el) s" >> $R
