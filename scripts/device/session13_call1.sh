#!/bin/bash
# Session 13, call 1 (issues 16, 17). Carry: bins/libs/fixtures (scripts/device/pack.sh of main at
# ba0b2ab), prod.tar.xz (prod/: golinear and the GDN and mixer tests built from
# the patch scripts/device/experiments/gdn_producer.patch of 1301a29 applied on ba0b2ab), fla.tar.xz (../shared/anchors).
# 1. the producer-warp GDN state pass: its tests, then `bench --mixers` of both binaries
#    alternated (mixers_ab) and fla's forward in the same call;
# 2. from then to 570 s: racecheck of the tests session 12 left, one process per test
#    (racecheck_resume.sh), beside main's GDN test binary run plainly (the split Persistent tests)
#    and racecheck of the producer build's GDN forward tests.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
export T0 R
mkdir -p /tmp/r /tmp/fla && tar xJf carry2/prod.tar.xz -C /tmp && P=/tmp/prod
tar -xJf carry2/fla.tar.xz -C /tmp/fla --strip-components=1
T1="taskset -c 0-7"
for t in test_gated_delta_cuda test_mixers_cuda; do
  $T1 timeout 150 $P/$t > /tmp/r/prod_$t.txt 2>&1
  echo "producer $t exit $? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' /tmp/r/prod_$t.txt | tr '\n' ' ')" >> $R
done
grep -E '^\[  FAILED' /tmp/r/prod_test_*.txt | head -20 >> $R
mixers_ab '^gated deltanet \(chunked\) +prefill fwd' "producer:$P/golinear" "base:$G"
grep -E '^(gated deltanet|hybrid \()' /tmp/r/mixers_producer_1.txt /tmp/r/mixers_base_1.txt >> $R
(unset LD_LIBRARY_PATH; FLA_DIR=/tmp/fla $T1 timeout 120 python3 scripts/device/anchors_gdn.py >> $R 2>&1); echo "fla exit $? at $(el) s" >> $R
( timeout 200 /tmp/bins/test_gated_delta_cuda > /tmp/r/main_gdn.txt 2>&1
  echo "main test_gated_delta_cuda exit $? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' /tmp/r/main_gdn.txt | tr '\n' ' ')" >> $R ) &
( timeout -s INT $(( 570 - $(el) )) /usr/local/cuda/bin/compute-sanitizer --tool racecheck $P/test_gated_delta_cuda \
    --gtest_filter='CudaGatedDeltaForward.*:-*PersistentLong*' > /tmp/r/rc_prod_forward.txt 2>&1
  echo "racecheck producer GDN forward exit $? at $(el) s: $(grep -c '^\[       OK' /tmp/r/rc_prod_forward.txt) OK, $(grep SUMMARY /tmp/r/rc_prod_forward.txt); running: $(grep '^\[ RUN' /tmp/r/rc_prod_forward.txt | tail -1)" >> $R
  grep -E '^========= (Error|Warning|Internal)' -A8 /tmp/r/rc_prod_forward.txt | head -40 >> $R ) &
JOBS=12 SKIP='*PersistentLong*' taskset -c 2-15 scripts/device/racecheck_resume.sh 570 test_eval_cuda \
  test_mixers_cuda test_gated_delta_cuda test_model_cuda test_train_cuda
wait
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
