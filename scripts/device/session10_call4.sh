#!/bin/bash
# Session 10, call 4 (issues 16, 17): candidates against call 3's binary (base) in the same call —
# the dk/dv kernel issuing dV, dK in two halves of 32 queries (the first half's products beside
# the second half's softmax gradient) and the GEMV with 8 loads in flight a lane: GPU tests, the
# attention rows with SDPA beside them, the 8B decode rows, compute-sanitizer of the new dk/dv
# kernel; then synccheck over every GPU test binary and racecheck over those it finishes, four
# at a time. Outputs but results.txt in $OUT/r.tar.xz. Fuzzing beside on cores 8-15.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r && tar xJf carry2/base.tar.xz -C /tmp; B0=/tmp/base/golinear
mkdir -p /tmp/fz && tar -xJf carry2/fuzzbins.tar.xz -C /tmp/fz && { bash /tmp/fz/fuzzbins/fuzz_background.sh START ${FUZZ_SECONDS:-460} 8-15 /tmp/fz/run >> $R 2>&1; echo "fuzz started at $(el) s" >> $R; }
T1="taskset -c 0-7"
for t in test_attention_cuda test_ops_cuda test_model_cuda; do
  echo "== $t" >> /tmp/r/tests.txt; $T1 timeout 100 /tmp/bins/$t --gtest_filter='-*TrainedStudent*' >> /tmp/r/tests.txt 2>&1; echo "$t exit $? at $(el) s" >> $R
done
grep -E "^\[  FAILED|^\[  PASSED|Failure" /tmp/r/tests.txt | head -20 >> $R
for rep in 1 2; do
  for b in "cand:$G" "base:$B0"; do
    $T1 timeout 100 ${b#*:} bench --mixers --seq 8192,16384,32768 --contexts 4096 > /tmp/r/mix_${b%%:*}_$rep.txt 2>&1
    echo "mixers ${b%%:*} exit $? at $(el) s: $(grep -E 'full attention \(ours, wgmma' /tmp/r/mix_${b%%:*}_$rep.txt | awk '{print $(NF-4) "=" $(NF-3)}' | tr '\n' ' ')" >> $R
  done
done
(unset LD_LIBRARY_PATH; $T1 timeout 90 python3 scripts/device/anchors_attention.py >> $R 2>&1); echo "anchors exit $? at $(el) s" >> $R
for rep in 1 2; do
  for b in "cand:$G" "base:$B0"; do
    $T1 timeout 100 ${b#*:} bench --config bench/configs/llama-3.1-8b.json --batches 1,4 --contexts 4096 --decode-repeats 20 > /tmp/r/dec_${b%%:*}_$rep.txt 2>&1
    echo "decode ${b%%:*} exit $? at $(el) s: $(grep -E '^bench: ' /tmp/r/dec_${b%%:*}_$rep.txt | sed -E 's/.*(hybrid|full) N=([0-9]+) B=([0-9]+) step ([0-9.]+) ms.*/\1 B=\3 \4 ms/' | tr '\n' ';')" >> $R
  done
done
CS=/usr/local/cuda/bin/compute-sanitizer
for tool in synccheck racecheck; do
  $T1 timeout 100 $CS --tool $tool /tmp/bins/test_attention_cuda --gtest_filter='*LongCausal*' > /tmp/cs.txt 2>&1
  echo "$tool test_attention_cuda [LongCausal]: exit $?, $(grep -E 'SUMMARY' /tmp/cs.txt | tail -1), $(el) s" >> $R
done
cs_one() {  # tool binary
  timeout 200 $CS --tool $1 /tmp/bins/$2 --gtest_filter='-*TrainedStudent*' > /tmp/r/cs_$1_$2.txt 2>&1; local rc=$?
  echo "$1 $2 [all]: exit $rc, $(grep -E 'SUMMARY' /tmp/r/cs_$1_$2.txt | tail -1), $(grep -E '^\[  (PASSED|FAILED)' /tmp/r/cs_$1_$2.txt | tr '\n' ' ')" >> /tmp/r/cs_summary.txt
  tail -c 4000 /tmp/r/cs_$1_$2.txt > /tmp/r/cs_$1_$2.tail; rm -f /tmp/r/cs_$1_$2.txt
}
export -f cs_one; export CS
ALL="test_kernels_cuda test_ops_cuda test_gated_linear_cuda test_runtime_cuda test_eval_cuda test_analysis_cuda test_gated_delta_cuda test_mixers_cuda test_attention_cuda test_model_cuda test_train_cuda"
( for t in $ALL; do echo "synccheck $t"; done; for t in $ALL; do echo "racecheck $t"; done ) | \
  timeout $(( 470 - $(el) )) taskset -c 0-7 xargs -P 4 -L 1 bash -c 'cs_one $0 $1'
pkill -f compute-sanitizer; pkill -f "/tmp/bins/test_"; sleep 1
echo "sanitizers done at $(el) s" >> $R
cat /tmp/r/cs_summary.txt >> $R
tar cJf $OUT/r.tar.xz -C /tmp r
bash /tmp/fz/fuzzbins/fuzz_background.sh COLLECT /tmp/fz/run >> $R 2>&1
echo "total $(el) s" >> $R
