#!/bin/bash
# Session 12, call 1: (1) the GDN forward with token-split warp pairs (carry2/split.tar.xz:
# golinear and the GDN/mixer test binaries built with it) beside main's binary and fla in the same
# call; (2) every GPU test binary of main (6fa74f1, not yet run on a GPU) on a quiet GPU, then
# (3) compute-sanitizer racecheck of the five binaries session 11 left, restricted to golinear's
# kernels (--kernel-name kns=golinear: cuBLAS's are not ours), checked first on a kernel with a
# deliberate race (carry2/racy), five at a time until the call's end; each run's log keeps its
# per-test OK lines, so a cut run resumes in the next call with those tests filtered out.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r /tmp/split && tar xJf carry2/split.tar.xz -C /tmp/split; S=/tmp/split/split
mkdir -p /tmp/fla && tar -xJf carry2/fla.tar.xz -C /tmp/fla --strip-components=1
T1="taskset -c 0-7"
# (1) the split GDN state pass: its tests, then the GDN rows of both binaries, fla in the same call.
for t in test_gated_delta_cuda test_mixers_cuda; do
  $T1 timeout 120 $S/$t > /tmp/r/split_$t.txt 2>&1; echo "split $t exit $? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' /tmp/r/split_$t.txt | tr '\n' ' ')" >> $R
done
grep -E '^\[  FAILED' /tmp/r/split_*.txt | head -20 >> $R
for rep in 1 2; do
  for b in "split:$S/golinear" "base:$G"; do
    $T1 timeout 100 ${b#*:} bench --mixers --seq 8192,16384,32768 --contexts 4096 > /tmp/r/mixers_${b%%:*}_$rep.txt 2>&1
    echo "${b%%:*} rep $rep exit $? at $(el) s: $(grep -E '^gated deltanet \(chunked\) +prefill fwd' /tmp/r/mixers_${b%%:*}_$rep.txt | awk '{print $(NF)}' | tr '\n' ' ')" >> $R
  done
done
grep -E '^(gated deltanet|hybrid \(|hybrid stage: gdn)' /tmp/r/mixers_split_1.txt /tmp/r/mixers_base_1.txt >> $R
(unset LD_LIBRARY_PATH; FLA_DIR=/tmp/fla $T1 timeout 120 python3 scripts/device/anchors_gdn.py >> $R 2>&1); echo "fla exit $? at $(el) s" >> $R
# (2) main's GPU tests, one binary at a time (TrainedStudent reads the bundled model, not carried).
for t in test_train_cuda test_model_cuda test_kernels_cuda test_ops_cuda test_mixers_cuda test_gated_delta_cuda \
         test_gated_linear_cuda test_analysis_cuda test_runtime_cuda test_eval_cuda test_attention_cuda; do
  echo "== $t" >> /tmp/r/tests.txt; $T1 timeout 150 /tmp/bins/$t --gtest_filter='-*TrainedStudent*' >> /tmp/r/tests.txt 2>&1; echo "$t exit $? at $(el) s" >> $R
done
grep -E "^\[  FAILED|^\[  PASSED" /tmp/r/tests.txt | sort | uniq -c >> $R
# (3) racecheck: the filter checked on a deliberate race first.
CS=/usr/local/cuda/bin/compute-sanitizer
$CS --help > /tmp/r/cs_help.txt 2>&1; grep -A6 -E "kernel-name" /tmp/r/cs_help.txt | head -30 >> $R
$CS --tool racecheck --kernel-name kns=golinear carry2/racy > /tmp/r/racy_filtered.txt 2>&1; echo "racy filtered exit $?: $(grep -cE 'Error|Warning' /tmp/r/racy_filtered.txt) reports, $(grep -c other_racy /tmp/r/racy_filtered.txt) naming other_racy_kernel, $(grep -c golinear /tmp/r/racy_filtered.txt) naming golinear; $(grep SUMMARY /tmp/r/racy_filtered.txt)" >> $R
$CS --tool racecheck carry2/racy > /tmp/r/racy_all.txt 2>&1; echo "racy unfiltered exit $?: $(grep -c other_racy /tmp/r/racy_all.txt) naming other_racy_kernel; $(grep SUMMARY /tmp/r/racy_all.txt)" >> $R
cs_one() {  # binary: racecheck of golinear's kernels, cut (SIGINT) 25 s before the call's end
  timeout -s INT -k 10 $(( 565 - $(( $(date +%s) - T0 )) )) $CS --tool racecheck --kernel-name kns=golinear \
    /tmp/bins/$1 --gtest_filter="${RC_FILTER:--*TrainedStudent*}" > /tmp/r/rc_$1.txt 2>&1; local rc=$?
  echo "racecheck $1: exit $rc at $(( $(date +%s) - T0 )) s, $(grep -c '^\[       OK' /tmp/r/rc_$1.txt) tests OK, $(grep -cE '^========= (Error|Warning)' /tmp/r/rc_$1.txt) reports, $(grep -E 'SUMMARY' /tmp/r/rc_$1.txt | tail -1), $(grep -E '^\[  (PASSED|FAILED)' /tmp/r/rc_$1.txt | tr '\n' ' ')" >> /tmp/r/rc_summary.txt
}
export -f cs_one; export CS T0
printf "%s\n" test_eval_cuda test_mixers_cuda test_gated_delta_cuda test_model_cuda test_train_cuda | \
  taskset -c 0-15 xargs -P 5 -I{} bash -c 'cs_one {}'
cat /tmp/r/rc_summary.txt >> $R
for f in /tmp/r/rc_*.txt; do grep -E '^\[       OK' $f | awk '{print $4}' > ${f%.txt}.ok; done
for b in "split:$S/golinear" "base:$G"; do  # the persistent pass's SASS (D 128, value block 64)
  /usr/local/cuda/bin/cuobjdump -sass ${b#*:} 2>/dev/null | awk '/Function : /{p = /gdn_state_pass_kernelILi128ELi64ELb0ELb1E/} p' > /tmp/r/sass_${b%%:*}.txt
done
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
