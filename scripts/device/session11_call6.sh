#!/bin/bash
# Session 11, call 6: call 5's GDN forward test failures (NaN outputs with an initial state, only
# while compute-sanitizer runs beside) reproduced under the same load — two racecheck runs in the
# background — with call 5's test binary, then with the fixed one (the legacy-stream uploads and
# poisoning synchronized before the non-blocking stream's forward), then the fixed trainers' tests.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r && tar xJf carry2/fix.tar.xz -C /tmp
CS=/usr/local/cuda/bin/compute-sanitizer
for t in test_eval_cuda test_model_cuda; do
  taskset -c 8-15 timeout 300 $CS --tool racecheck /tmp/bins/$t --gtest_filter='-*TrainedStudent*' > /tmp/r/cs_racecheck_$t.txt 2>&1 &
done
sleep 20
for rep in 1 2; do
  for b in "call5:/tmp/bins" "fixed:/tmp/fix"; do
    taskset -c 0-7 timeout 100 ${b#*:}/test_gated_delta_cuda --gtest_filter='CudaGatedDeltaForward.*' > /tmp/r/gdn_${b%%:*}_$rep.txt 2>&1
    echo "gdn forward ${b%%:*} rep $rep (under load) exit $? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+ test' /tmp/r/gdn_${b%%:*}_$rep.txt | tr '\n' ' ')" >> $R
  done
done
taskset -c 0-7 timeout 100 /tmp/fix/test_train_cuda > /tmp/r/train.txt 2>&1; echo "test_train_cuda (fixed) exit $? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' /tmp/r/train.txt | tr '\n' ' ')" >> $R
wait
for t in test_eval_cuda test_model_cuda; do echo "racecheck $t (load, cut at 300 s): $(grep -E 'SUMMARY' /tmp/r/cs_racecheck_$t.txt | tail -1) $(grep -c '^\[       OK' /tmp/r/cs_racecheck_$t.txt) tests passed, hazards: $(grep -c -i 'hazard' /tmp/r/cs_racecheck_$t.txt)" >> $R; tail -c 3000 /tmp/r/cs_racecheck_$t.txt > /tmp/r/cs_racecheck_$t.tail; rm /tmp/r/cs_racecheck_$t.txt; done
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
