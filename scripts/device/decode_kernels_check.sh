#!/bin/bash
# A GPU-machine call (scripts/device/README.md): NOT YET RUN — the device was withdrawn in session 6
# before it. Expects carry2/ as docs/NOTES.md describes (libs.tar.xz, bins.tar.xz built from the
# tree under test incl. build/bench/golinear_serve_load, fixtures.tar.xz, model.tar.xz).
# Session 6, call 2: the per-head hybrid decode kernel and the decode split by waves: GPU tests
# of the decode paths, decode rows beside SDPA's (one run), the concurrency table, ncu of both
# decode kernels, and golinear serve --device cuda under the load generator (tiny model).
cd "$(dirname "$0")/../.."
T0=$(date +%s)
mkdir -p /tmp/lib /work && tar xJf carry2/libs.tar.xz -C /tmp && cp /tmp/libs/* /tmp/lib/
tar xJf carry2/bins.tar.xz -C /tmp
mkdir -p /tmp/fx && tar xJf carry2/fixtures.tar.xz -C /tmp/fx && export GOLINEAR_GPU_FIXTURES=/tmp/fx/fixtures
tar xJf carry2/model.tar.xz -C .
ln -sfn "$PWD" /work/main
export LD_LIBRARY_PATH=/tmp/lib:/usr/local/cuda/lib64
R=$OUT/results.txt
echo "setup $(( $(date +%s) - T0 )) s" > $R
for t in test_kernels_cuda test_attention_cuda test_mixers_cuda test_model_cuda test_runtime_cuda test_eval_cuda; do
  echo "== $t" >> $OUT/tests.txt; timeout 120 /tmp/bins/$t >> $OUT/tests.txt 2>&1; echo "$t exit $? at $(( $(date +%s) - T0 )) s" >> $R
done
grep -E "^\[  FAILED|^\[  PASSED|batch decode|Failure" $OUT/tests.txt >> $R
G=/tmp/bins/golinear
timeout 60 $G bench --mixers --contexts 4096,32768,131072 --seq 8192 --no-backward > $OUT/mixers.txt 2>&1; echo "mixers exit $? at $(( $(date +%s) - T0 )) s" >> $R
grep -iE "decode step" $OUT/mixers.txt >> $R
(unset LD_LIBRARY_PATH; OUT=$OUT timeout 60 python3 scripts/device/anchors_decode.py >> $R 2>&1); echo "anchors exit $? at $(( $(date +%s) - T0 )) s" >> $R
timeout 200 $G bench --config bench/configs/llama-3.1-8b.json --batches 1,8,16,24,31,32,64,128,256 --contexts 4096,32768,131072 --decode-repeats 10 --json-file $OUT/batch.json > $OUT/batch.md 2> $OUT/batch.err; echo "batch bench exit $? at $(( $(date +%s) - T0 )) s" >> $R
grep -E "^\|" $OUT/batch.md | grep -v "out of memory" >> $R
# HTTP: golinear serve --device cuda, tiny model (linearized adapter, then its base with full attention).
health() { for i in $(seq 1 60); do python3 -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$1/health').status == 200 else 1)" 2>/dev/null && return 0; sleep 1; done; return 1; }
for m in models/tiny-llama3-25m-linear models/tiny-llama3-25m; do
  $G serve $m --device cuda --parallel 64 --port 8090 > $OUT/serve.log 2>&1 &
  sp=$!
  health 8090 || echo "server $m not healthy" >> $R
  for P in 256 1024; do
    timeout 120 /tmp/bins/golinear_serve_load http://127.0.0.1:8090 --concurrency 64 --requests 2 --max-tokens 128 --prompt-tokens $P >> $R 2>&1; echo "load $m P=$P exit $? at $(( $(date +%s) - T0 )) s" >> $R
  done
  kill -TERM $sp; wait $sp; echo "serve $m exit $?" >> $R
done
NCU=/usr/local/cuda/bin/ncu
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats"
timeout 120 $NCU --kernel-name regex:decode_split --launch-skip 20 --launch-count 1 $S $G bench --mixers --contexts 131072 --seq 2048 --no-backward > $OUT/ncu.txt 2>&1; echo "ncu attention exit $? at $(( $(date +%s) - T0 )) s" >> $R
timeout 150 $NCU --kernel-name regex:hybrid_decode_kernel --launch-skip 64 --launch-count 1 $S $G bench --config bench/configs/llama-3.1-8b.json --batches 256 --contexts 4096 --variants hybrid --decode-repeats 2 >> $OUT/ncu.txt 2>&1; echo "ncu hybrid exit $? at $(( $(date +%s) - T0 )) s" >> $R
echo "total $(( $(date +%s) - T0 )) s" >> $R
