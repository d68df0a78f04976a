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
mkdir -p /tmp/vt
tar xJf carry2/extra.tar.xz -C /tmp/vt
transfer_ab old:/tmp/vt/vbins/golinear_old new:$G
for t in test_mixers_cuda test_model_cuda test_runtime_cuda test_eval_cuda; do
  $T1 timeout 120 /tmp/vt/vbins/$t --gtest_filter=-*TrainedStudent* > /tmp/r/dpdl_$t.txt 2>&1
  echo "dpdl $t exit $? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' /tmp/r/dpdl_$t.txt | tr '\n' ' ')" >> $R
  grep -E '^\[  FAILED|Failure' /tmp/r/dpdl_$t.txt | head -5 >> $R
done
decode_ab 1,2,4 final:$G dpdl:/tmp/vt/vbins/golinear_dpdl
echo "total $(el) s" >> $R
