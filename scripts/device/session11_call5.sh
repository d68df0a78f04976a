#!/bin/bash
# Session 11, call 5: the final build (the one-kernel backward with a 3-deep ring at D = 128, the
# GPU trainers' non-finite gradient stop): every GPU test binary, the attention rows of the final
# and of main's binary (carry2/base.tar.xz) with SDPA in the same call, then compute-sanitizer:
# memcheck, synccheck and racecheck of the attention tests and racecheck of the binaries session 10
# left (issue 17), five at a time beside the other test binaries until the call's end. Outputs but results.txt in $OUT/r.tar.xz.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r /tmp/base && tar xJf carry2/base.tar.xz -C /tmp/base; B=/tmp/base/base/golinear
T1="taskset -c 0-7"
$T1 timeout 150 /tmp/bins/test_attention_cuda --gtest_repeat=3 > /tmp/r/tests.txt 2>&1; echo "test_attention_cuda x3 exit $? at $(el) s" >> $R
for rep in 1 2; do
  for b in "final:$G" "base:$B"; do
    $T1 timeout 100 ${b#*:} bench --mixers --seq 8192,16384,32768 --contexts 4096 > /tmp/r/mixers_${b%%:*}_$rep.txt 2>&1
    echo "${b%%:*} rep $rep exit $? at $(el) s: $(grep -E 'full attention \(ours, wgmma.*fwd\+bwd' /tmp/r/mixers_${b%%:*}_$rep.txt | awk '{print $(NF-5)}' | tr '\n' ' ')" >> $R
  done
done
grep -E 'full attention \(ours, wgmma' /tmp/r/mixers_final_1.txt >> $R
(unset LD_LIBRARY_PATH; $T1 timeout 90 python3 scripts/device/anchors_attention.py >> $R 2>&1); echo "anchors exit $? at $(el) s" >> $R
CS=/usr/local/cuda/bin/compute-sanitizer
cs_one() {  # tool binary
  timeout $(( 555 - $(( $(date +%s) - T0 )) )) $CS --tool $1 /tmp/bins/$2 --gtest_filter='-*TrainedStudent*' > /tmp/r/cs_$1_$2.txt 2>&1; local rc=$?
  echo "$1 $2 [all]: exit $rc at $(( $(date +%s) - T0 )) s, $(grep -E 'SUMMARY' /tmp/r/cs_$1_$2.txt | tail -1), $(grep -E '^\[  (PASSED|FAILED)' /tmp/r/cs_$1_$2.txt | tr '\n' ' ')" >> /tmp/r/cs_summary.txt
  tail -c 4000 /tmp/r/cs_$1_$2.txt > /tmp/r/cs_$1_$2.tail; rm -f /tmp/r/cs_$1_$2.txt
}
export -f cs_one; export CS T0
# In the background beside the plain test runs (which only check results).
( echo "racecheck test_attention_cuda"; echo "memcheck test_attention_cuda"; echo "synccheck test_attention_cuda"
  for t in test_runtime_cuda test_eval_cuda test_gated_delta_cuda test_mixers_cuda test_model_cuda test_train_cuda; do echo "racecheck $t"; done ) | \
  taskset -c 4-15 xargs -P 5 -L 1 bash -c 'cs_one $0 $1' &
CSP=$!
for t in test_train_cuda test_model_cuda test_kernels_cuda test_ops_cuda test_mixers_cuda test_gated_delta_cuda \
         test_gated_linear_cuda test_analysis_cuda test_runtime_cuda test_eval_cuda; do
  echo "== $t" >> /tmp/r/tests.txt; taskset -c 0-3 timeout 150 /tmp/bins/$t >> /tmp/r/tests.txt 2>&1; echo "$t exit $? at $(el) s" >> $R
done
grep -E "^\[  FAILED|^\[  PASSED|not deterministic" /tmp/r/tests.txt | sort | uniq -c >> $R
wait $CSP
pkill -f compute-sanitizer; sleep 1
echo "sanitizers done at $(el) s" >> $R
cat /tmp/r/cs_summary.txt >> $R
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
