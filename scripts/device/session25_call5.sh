#!/bin/bash
# Session 25, call 5 (carry: call 1's bins; extra.tar.xz as vbins/: golinear_SC4 /
# test_mixers_cuda_SC4 / test_model_cuda_SC4: the decode kernel's scores with four threads a key
# and two shuffles instead of a warp a key and five): SC4's tests, 600 batch-1 steps of main and
# SC4 alternated (two rounds), batch 1/4 at 20 steps, then ncu (SASS-level stall samples) of two
# of main's batch-1 decode kernels, the source page into $OUT.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
BIN_DIR=$V TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_mixers_cuda_SC4 test_model_cuda_SC4
long_ab main:$G SC4:$V/golinear_SC4
ROUNDS=2 DECODE_TIMEOUT=40 decode_ab 1,4 main:$G SC4:$V/golinear_SC4
ncu_profile dec "hybrid_decode_kernel" 2 --launch-skip 200 $G bench --config $CFG --variants hybrid --batches 1 --contexts 4096 --decode-repeats 20
cp /tmp/r/src_dec.csv /tmp/r/det_dec.txt $OUT/ 2>/dev/null
tail -5 /tmp/r/ncu_run_dec.txt >> $R
echo "total $(el) s" >> $R
