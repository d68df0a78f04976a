#!/bin/bash
# Session 7, call 5: serve --device cuda under golinear_serve_load with the cached-prefix policy
# (a restored state is continued token by token on the GPU only for a short rest): prompts of
# 256 then 1024 tokens sharing their first 256 (same seeds), then a fresh server at 1024; then
# compute-sanitizer racecheck of the batched decode test.
cd "$(dirname "$0")/.."
source scripts/device/setup.sh
serve_load models/tiny-llama3-25m-linear 256 1024
serve_load models/tiny-llama3-25m-linear 1024
serve_load models/tiny-llama3-25m 1024
[ $(el) -lt 150 ] && { timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool racecheck /tmp/bins/test_model_cuda --gtest_filter='*Batch*' > /tmp/cs.txt 2>&1; echo "racecheck test_model_cuda [*Batch*]: exit $?, $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' /tmp/cs.txt | tail -1), $(grep -E '^\[  (PASSED|FAILED)' /tmp/cs.txt | tr '\n' ' '), $(el) s" >> $R; }
echo "total $(el) s" >> $R
