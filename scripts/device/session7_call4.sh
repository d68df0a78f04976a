#!/bin/bash
# Session 7, call 4: the hybrid decode kernel with 16 warps per block (golinear) against 8
# (golinear_w8s, main): tests, A/B; issue 14's default linearize on the GPU (main's binary) and
# its val ppl; serve --device cuda under golinear_serve_load with the O(V) sampler (main's binary).
cd "$(dirname "$0")/.."
T0=$(date +%s)
mkdir -p /tmp/lib /work && tar xJf carry2/libs.tar.xz -C /tmp && cp /tmp/libs/* /tmp/lib/
tar xJf carry2/bins.tar.xz -C /tmp
mkdir -p /tmp/fx && tar xJf carry2/fixtures.tar.xz -C /tmp/fx && export GOLINEAR_GPU_FIXTURES=/tmp/fx/fixtures
tar xJf carry2/model.tar.xz -C .
ln -sfn "$PWD" /work/main
export LD_LIBRARY_PATH=/tmp/lib:/usr/local/cuda/lib64
R=$OUT/results.txt; G=/tmp/bins/golinear_w8s
el() { echo $(( $(date +%s) - T0 )); }
echo "setup $(el) s" > $R
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
health() { for i in $(seq 1 60); do python3 -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$1/health').status == 200 else 1)" 2>/dev/null && return 0; sleep 1; done; return 1; }
for m in models/tiny-llama3-25m-linear models/tiny-llama3-25m; do
  [ $(el) -lt 520 ] || break
  $G serve $m --device cuda --parallel 64 --port 8090 >> $OUT/logs.txt 2>&1 &
  sp=$!
  health 8090 || echo "server $m not healthy" >> $R
  for P in 256 1024; do
    timeout 40 /tmp/bins/golinear_serve_load http://127.0.0.1:8090 --concurrency 64 --requests 2 --max-tokens 128 --prompt-tokens $P >> $R 2>&1; echo "load $m P=$P exit $? at $(el) s" >> $R
  done
  curl -s http://127.0.0.1:8090/metrics 2>/dev/null | grep -E "decode_step|prompt_tokens|generation_tokens" | head -8 >> $R
  kill -TERM $sp; wait $sp; echo "serve $m exit $?" >> $R
done
echo "total $(el) s" >> $R
