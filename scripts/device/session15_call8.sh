#!/bin/bash
# Session 15, call 8 (carry: call 6's pack of the final main; extra.tar.xz as vbins/:
# test_ops_cuda_final = the final main's test_ops_cuda with the new GEMV row; _ahead: the same
# and test_model_cuda and the CLI with the GEMV's first four loads of its first row issued before
# x is copied into shared memory): the GEMV row of both, the ahead variant's op table and model
# tests; 8B decode of final and ahead alternated.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/vt
tar xJf carry2/extra.tar.xz -C /tmp/vt
V=/tmp/vt/vbins
for t in "test_ops_cuda_final --gtest_filter=*gemv*" "test_ops_cuda_ahead" "test_model_cuda_ahead --gtest_filter=-*TrainedStudent*"; do
  set -- $t
  $T1 timeout 120 $V/$t > /tmp/r/$1.txt 2>&1
  echo "$1 exit $? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' /tmp/r/$1.txt | tr '\n' ' ')" >> $R
  grep -E '^\[  FAILED|Failure' /tmp/r/$1.txt | head -5 >> $R
done
grep -E "gemv" /tmp/r/test_ops_cuda_final.txt | head -12 >> $R
decode_ab 1,4 final:$G ahead:$V/golinear_ahead
echo "total $(el) s" >> $R
