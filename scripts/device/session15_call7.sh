#!/bin/bash
# Session 15, call 7 (carry: call 6's pack of the final main; extra.tar.xz as vbins/:
# golinear_old = session 14's 56f0cba, golinear_dpdl and four test binaries of the final main
# with the hybrid decode kernel launched as a programmatic dependent of the qkv split, which
# starts it at once: the head's parameters read and its gate rows asked into L2 before its
# pdl_wait): the 8B attention transfer of old and final, two rounds alternated (the teacher's
# and the students' forwards launch the norm, the qkv split and SwiGLU as programmatic
# dependents now); the dpdl variant's decode-path tests; 8B decode of final and dpdl alternated.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r /tmp/vt
tar xJf carry2/extra.tar.xz -C /tmp/vt
CFG=bench/configs/llama-3.1-8b.json
T1="taskset -c 0-7"
transfer_ab old:/tmp/vt/vbins/golinear_old new:$G
for t in test_mixers_cuda test_model_cuda test_runtime_cuda test_eval_cuda; do
  $T1 timeout 120 /tmp/vt/vbins/$t --gtest_filter=-*TrainedStudent* > /tmp/r/dpdl_$t.txt 2>&1
  echo "dpdl $t exit $? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' /tmp/r/dpdl_$t.txt | tr '\n' ' ')" >> $R
  grep -E '^\[  FAILED|Failure' /tmp/r/dpdl_$t.txt | head -5 >> $R
done
for rep in 1 2; do
  for b in final dpdl; do
    bin=/tmp/vt/vbins/golinear_$b; [ $b = final ] && bin=$G
    $T1 timeout 120 $bin bench --config $CFG --batches 1,2,4 --contexts 4096 --decode-repeats 20 > /tmp/r/decode_${b}_$rep.txt 2>&1
    echo "decode $b rep $rep exit $? at $(el) s" >> $R; grep -E "^bench:|error" /tmp/r/decode_${b}_$rep.txt >> $R
  done
done
echo "total $(el) s" >> $R
