#!/bin/bash
# Session 7, call 5: serve --device cuda under golinear_serve_load with the cached-prefix policy
# (a restored state is continued token by token on the GPU only for a short rest): prompts of
# 256 then 1024 tokens sharing their first 256 (same seeds), then a fresh server at 1024; then
# compute-sanitizer racecheck of the batched decode test.
cd "$(dirname "$0")/.."
T0=$(date +%s)
mkdir -p /tmp/lib /work && tar xJf carry2/libs.tar.xz -C /tmp && cp /tmp/libs/* /tmp/lib/
tar xJf carry2/bins.tar.xz -C /tmp
mkdir -p /tmp/fx && tar xJf carry2/fixtures.tar.xz -C /tmp/fx && export GOLINEAR_GPU_FIXTURES=/tmp/fx/fixtures
tar xJf carry2/model.tar.xz -C .
ln -sfn "$PWD" /work/main
export LD_LIBRARY_PATH=/tmp/lib:/usr/local/cuda/lib64
R=$OUT/results.txt; G=/tmp/bins/golinear
el() { echo $(( $(date +%s) - T0 )); }
echo "setup $(el) s" > $R
health() { for i in $(seq 1 60); do python3 -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$1/health').status == 200 else 1)" 2>/dev/null && return 0; sleep 1; done; return 1; }
run_server() {  # model, prompt sizes...
  local m=$1; shift
  $G serve $m --device cuda --parallel 64 --port 8090 >> $OUT/logs.txt 2>&1 &
  local sp=$!
  health 8090 || echo "server $m not healthy" >> $R
  for P in "$@"; do
    timeout 40 /tmp/bins/golinear_serve_load http://127.0.0.1:8090 --concurrency 64 --requests 2 --max-tokens 128 --prompt-tokens $P >> $R 2>&1; echo "load $m P=$P exit $? at $(el) s" >> $R
  done
  kill -TERM $sp; wait $sp; echo "serve $m exit $?" >> $R
}
run_server models/tiny-llama3-25m-linear 256 1024
run_server models/tiny-llama3-25m-linear 1024
run_server models/tiny-llama3-25m 1024
[ $(el) -lt 150 ] && { timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool racecheck /tmp/bins/test_model_cuda --gtest_filter='*Batch*' > /tmp/cs.txt 2>&1; echo "racecheck test_model_cuda [*Batch*]: exit $?, $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' /tmp/cs.txt | tail -1), $(grep -E '^\[  (PASSED|FAILED)' /tmp/cs.txt | tr '\n' ' '), $(el) s" >> $R; }
echo "total $(el) s" >> $R
