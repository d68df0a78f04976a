#!/bin/bash
# Session 9, call 1: branch s9-int (main + the wgmma/TMA full-attention forward + pinned
# snapshots + the few-row GEMV). The new attention kernel's tests first (a hang is cut at 60 s),
# then the mixer table at 8K/16K/32K beside SDPA (scripts/device/anchors_attention.py) in the same
# call, every GPU test binary, and whole-model decode at 8B shapes, main (carry2/main.tar.xz:
# session 8's binary) against s9-int at B = 1, 4, 8, two rounds interleaved. Fuzzing runs in the
# background on cores 8-15 when carry2/fuzzbins.tar.xz is there (scripts/device/fuzz_background.sh).
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
tar xJf carry2/main.tar.xz -C /tmp
FZ=scripts/device/fuzz_background.sh
[ -f carry2/fuzzbins.tar.xz ] && [ -x $FZ ] && { $FZ START 540 8-15 /tmp/fuzz >> $R 2>&1; echo "fuzz started at $(el) s" >> $R; }
T1="taskset -c 0-7"
echo "== test_attention_cuda" >> $OUT/tests.txt
$T1 timeout 90 /tmp/bins/test_attention_cuda >> $OUT/tests.txt 2>&1; echo "test_attention_cuda exit $? at $(el) s" >> $R
grep -E "^\[  FAILED|^\[  PASSED|Failure" $OUT/tests.txt | head -20 >> $R
$T1 timeout 120 $G bench --mixers --seq 8192,16384,32768 --contexts 4096 > $OUT/mixers.txt 2>&1; echo "mixers exit $? at $(el) s" >> $R
grep -iE "attention|gdn|T =|seq" $OUT/mixers.txt | head -40 >> $R
tar xJf carry2/attnvar.tar.xz -C /tmp
for v in s3 pp pp3; do  # the forward's variants (GL_ATTN_STAGES / GL_ATTN_PINGPONG builds)
  $T1 timeout 60 /tmp/attnvar/$v/golinear bench --mixers --seq 8192,32768 --contexts 4096 --no-backward > /tmp/m.txt 2>&1; echo "variant $v exit $?" >> $R
  grep -iE "attention" /tmp/m.txt | grep -viE "decode|window" | sed "s/^/  $v /" >> $R; cat /tmp/m.txt >> $OUT/mixers_variants.txt
done
(unset LD_LIBRARY_PATH; $T1 timeout 90 python3 scripts/device/anchors_attention.py >> $R 2>&1); echo "anchors exit $? at $(el) s" >> $R
for t in test_kernels_cuda test_ops_cuda test_gated_delta_cuda test_gated_linear_cuda test_mixers_cuda \
         test_model_cuda test_runtime_cuda test_eval_cuda test_analysis_cuda test_train_cuda; do
  echo "== $t" >> $OUT/tests.txt; $T1 timeout 100 /tmp/bins/$t >> $OUT/tests.txt 2>&1; echo "$t exit $? at $(el) s" >> $R
done
grep -E "^\[  FAILED|^\[  PASSED|Failure" $OUT/tests.txt | grep -v "test_attention" | head -30 >> $R
grep -E "^  M [0-9]" $OUT/tests.txt | head -12 >> $R
BB="--config bench/configs/llama-3.1-8b.json --batches 1,4,8 --contexts 4096 --decode-repeats 10"
for round in 1 2; do
  for v in main s9; do
    g=$G; [ $v = main ] && g=/tmp/main/golinear
    [ $(el) -gt 520 ] && break
    $T1 timeout 60 $g bench $BB > /tmp/b.md 2>&1; echo "round $round $v exit $?:" >> $R
    grep -E '^\| (linearized|full)' /tmp/b.md | sed "s/^/  $v /" >> $R; cat /tmp/b.md >> $OUT/bench_decode.md
  done
done
echo "decode A/B done at $(el) s" >> $R
[ -f carry2/fuzzbins.tar.xz ] && [ -x $FZ ] && $FZ COLLECT /tmp/fuzz >> $R 2>&1
echo "total $(el) s" >> $R
