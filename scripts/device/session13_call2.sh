#!/bin/bash
# Session 13, calls 2 and 3 (issue 17), and the call that finishes its racecheck: every test of the
# five binaries not yet in docs/results/racecheck_passed.txt (PersistentLong* left out), 12 at a
# time (call 1 lost one process to a SIGKILL with 14 beside it), until DEADLINE (575 s; call 3 ran
# DEADLINE=290), with the host's memory and the GPU's utilization logged every 20 s.
# Carry: bins/libs/fixtures (scripts/device/pack.sh of main at the commit of this script).
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
export T0 R
( while sleep 20; do
    echo "$(el) s: $(free -g | awk '/^Mem/ {print "host used " $3 " GiB, available " $7 " GiB"}'); gpu $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader)"
  done > $OUT/monitor.txt 2>&1 ) &
MON=$!
JOBS=12 SKIP='*PersistentLong*' taskset -c 0-15 scripts/device/racecheck_resume.sh ${DEADLINE:-575} test_eval_cuda \
  test_mixers_cuda test_gated_delta_cuda test_model_cuda test_train_cuda
kill $MON
echo "total $(el) s" >> $R
