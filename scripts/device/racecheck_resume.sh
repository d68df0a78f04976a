#!/bin/bash
# racecheck of GPU test binaries by parts, resumable across calls (issue 17): every test of each
# BINARY not yet listed in docs/results/racecheck_passed.txt runs in a process of its own under
# compute-sanitizer racecheck (unrestricted: the kernel filter fails beside cuBLAS, NOTES session
# 12), JOBS at a time (a long test no longer holds back the rest of its binary, as one process per
# binary did in session 12), each cut by SIGINT at DEADLINE seconds after the call's start. The
# tests that pass with no hazard go to $OUT/racecheck_passed.txt (append them to the docs file
# here); any sanitizer report (a hazard, or an error such as a killed process) to $R. Left out:
# GpuTrainedStudent (it reads the bundled model) and the tests matching SKIP (a gtest negative
# pattern, e.g. '*PersistentLong*'). PASSED names the list of tests to leave out (default the docs
# file; PASSED=/dev/null checks again tests whose kernels changed since they passed).
#   usage (in a call, after setup.sh; export T0 R):
#     JOBS=12 SKIP=PATTERN scripts/device/racecheck_resume.sh DEADLINE BINARY...
cd "$(dirname "$0")/../.."
deadline=${1:?usage: racecheck_resume.sh DEADLINE BINARY...}; shift
T0=${T0:-$(date +%s)}; R=${R:-$OUT/results.txt}  # setup.sh's, when the caller exports them
BINS=${BINS:-/tmp/bins}; JOBS=${JOBS:-12}; PASSED=${PASSED:-docs/results/racecheck_passed.txt}
CS=${CS:-/usr/local/cuda/bin/compute-sanitizer}
mkdir -p /tmp/rc && : > /tmp/rc/queue.txt
for b in "$@"; do  # BINARY TEST lines: gtest's list, less the passed ones
  $BINS/$b --gtest_list_tests --gtest_filter="-*TrainedStudent*${SKIP:+:$SKIP}" |
    awk -v b=$b '/^[^ ]/ {suite = $1; next} /^  / {print b, suite $1}' |
    grep -v '\.DISABLED_' | grep -vxF -f <(grep -v '^#' $PASSED; echo '#') >> /tmp/rc/queue.txt
done
# the slowest first (session 12: the 30-step transfer, the persistent GDN pass, the eval tests)
SLOW=${SLOW:-'FirstStep|Persistent|test_eval|window_1000|odd_hidden|Distillation'}
{ grep -E "$SLOW" /tmp/rc/queue.txt; grep -vE "$SLOW" /tmp/rc/queue.txt; } > /tmp/rc/q
mv /tmp/rc/q /tmp/rc/queue.txt
echo "racecheck: $(wc -l < /tmp/rc/queue.txt) tests, $JOBS at a time, until $deadline s" >> $R
one() {  # BINARY TEST: one process; its log in /tmp/rc/BINARY/TEST.txt
  local log=/tmp/rc/$1/${2//\//_}.txt
  mkdir -p /tmp/rc/$1
  local left=$(( deadline - $(date +%s) + T0 ))
  if (( left < 5 )); then echo "$1 $2 not started" >> /tmp/rc/summary.txt; return; fi
  timeout -s INT -k 10 $left $CS --tool racecheck $BINS/$1 --gtest_filter="$2" > $log 2>&1
  local rc=$? reports=$(grep -cE '^========= (Error|Warning|Internal)' $log)
  echo "$1 $2 exit $rc at $(( $(date +%s) - T0 )) s, $reports sanitizer reports, $(grep -E 'SUMMARY' $log | tail -1)" >> /tmp/rc/summary.txt
  if (( rc == 0 && reports == 0 )) && grep -q '^\[       OK' $log; then
    echo "$1 $2" >> $OUT/racecheck_passed.txt
  elif (( reports > 0 )); then
    { echo "== $1 $2"; grep -E '^========= (Error|Warning|Internal)' -A12 $log | head -40; } >> /tmp/rc/reports.txt
  fi
}
export -f one; export deadline T0 BINS CS OUT
xargs -P $JOBS -L 1 bash -c 'one "$0" "$1"' < /tmp/rc/queue.txt
sort /tmp/rc/summary.txt >> $R
[ -f /tmp/rc/reports.txt ] && cat /tmp/rc/reports.txt >> $R
tar cJf $OUT/rc.tar.xz -C /tmp rc
