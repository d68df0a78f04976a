#!/bin/bash
# Session 9: issue 16's few-row GEMV (branch gemv: gemm_nt runs gemv_nt for M ≤ 4; gemv-base is
# its first commit, without programmatic dependent launch). The binaries of both under their GPU
# tests (the GEMV's own: CPU reference, cuBLAS fallback, CUDA graph; then the decode paths that go
# through it), the GEMV timed against cuBLAS at Llama-3.1-8B's decode shapes (M = 1, 2, 4, 8: the
# sum of one step's products), then whole-model decode at 8B shapes, main / gemv-base / gemv, two
# rounds interleaved, and an nsys kernel summary of gemv's B = 1 bench (prefill's kernels are in
# it too: the GEMV's and the small kernels' rows are the decode's). Expects
# carry2/variants.tar.xz holding var/{gemv,gemv-base}/{golinear,test_kernels_cuda,test_model_cuda,
# test_runtime_cuda,test_mixers_cuda} built on those branches (main's from bins.tar.xz as usual).
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
tar xJf carry2/variants.tar.xz -C /tmp
V=/tmp/var/gemv
for v in gemv gemv-base; do
  T="test_kernels_cuda test_model_cuda test_runtime_cuda test_mixers_cuda"
  [ $v = gemv-base ] && T=test_kernels_cuda  # its GEMV and timing; the rest differs only by PDL
  for t in $T; do
    [ -x /tmp/var/$v/$t ] || { echo "$v $t missing" >> $R; continue; }
    timeout 60 /tmp/var/$v/$t > /tmp/t.txt 2>&1; echo "$v $t exit $? $(grep -E '^\[  (PASSED|FAILED)' /tmp/t.txt | tr '\n' ' ')" >> $R
    echo "== $v $t" >> $OUT/tests.txt; grep -vE "^\[ +(RUN|OK) " /tmp/t.txt >> $OUT/tests.txt
    # CudaGemv.TimedAgainstCublasAt8BShapes: µs and GB/s of W per product, one step's sum.
    [ $t = test_kernels_cuda ] && grep -E "^  M [0-9]" /tmp/t.txt | sed "s/^/$v /" >> $R
  done
done
grep -E "^\[  FAILED|Failure" $OUT/tests.txt | head -20 >> $R
echo "tests done at $(el) s" >> $R
BB="--config bench/configs/llama-3.1-8b.json --batches 1,4,8 --contexts 4096 --decode-repeats 10"
for round in 1 2; do
  for v in main gemv-base gemv; do
    g=$G; [ $v != main ] && g=/tmp/var/$v/golinear
    timeout 90 $g bench $BB > /tmp/b.md 2>&1; echo "round $round $v exit $?:" >> $R
    grep -E '^\| linearized' /tmp/b.md | sed "s/^/  $v /" >> $R; cat /tmp/b.md >> $OUT/bench_$v.md
  done
done
echo "bench A/B done at $(el) s" >> $R
# Kernel time per decode step at B = 1 (graph nodes traced one by one): the products' share.
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys 2>/dev/null | head -1)
if [ -n "$NSYS" ] && [ $(el) -lt 360 ]; then  # within the call's 600 s
  timeout 120 $NSYS profile --cuda-graph-trace=node -o /tmp/gemv_b1 --force-overwrite true \
    $V/golinear bench --config bench/configs/llama-3.1-8b.json --batches 1 --contexts 4096 \
    --decode-repeats 10 > /dev/null 2>> $OUT/logs.txt
  echo "nsys exit $?" >> $R
  timeout 120 $NSYS stats --report cuda_gpu_kern_sum --format csv /tmp/gemv_b1.nsys-rep > $OUT/nsys_kern_sum.csv 2>> $OUT/logs.txt
  head -25 $OUT/nsys_kern_sum.csv >> $R
else
  echo "nsys skipped (none on the machine, or past 360 s)" >> $R
fi
echo "total $(el) s" >> $R
