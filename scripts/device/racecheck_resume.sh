#!/bin/bash
# racecheck of GPU test binaries by parts, resumable across calls (issue 17): for each BINARY, the
# tests listed in docs/results/racecheck_passed.txt are filtered out and the rest run under
# compute-sanitizer racecheck (unrestricted: the kernel filter fails beside cuBLAS, NOTES session
# 12), all binaries at once, each cut by SIGINT at DEADLINE seconds after the call's start. The
# tests that pass with no hazard go to $OUT/racecheck_passed.txt (append them to the docs file
# here); any hazard report to $R. GpuTrainedStudent is left out (it reads the bundled model).
#   usage (in a call, after setup.sh; export T0 R): scripts/device/racecheck_resume.sh DEADLINE BINARY...
cd "$(dirname "$0")/../.."
deadline=${1:?usage: racecheck_resume.sh DEADLINE BINARY...}; shift
T0=${T0:-$(date +%s)}; R=${R:-$OUT/results.txt}  # setup.sh's, when the caller exports them
mkdir -p /tmp/rc
CS=${CS:-/usr/local/cuda/bin/compute-sanitizer}
for b in "$@"; do
  filter="-*TrainedStudent*$(awk -v b=$b '$1 == b {printf ":%s", $2}' docs/results/racecheck_passed.txt)"
  ( timeout -s INT -k 10 $(( deadline - $(date +%s) + T0 )) $CS --tool racecheck /tmp/bins/$b \
      --gtest_filter="$filter" > /tmp/rc/$b.txt 2>&1
    echo "racecheck $b: exit $? at $(( $(date +%s) - T0 )) s, $(grep -c '^\[       OK' /tmp/rc/$b.txt) tests OK, $(grep -cE '^========= (Error|Warning|Internal)' /tmp/rc/$b.txt) reports, $(grep -E 'SUMMARY' /tmp/rc/$b.txt | tail -1), running at the end: $(grep -E '^\[ RUN' /tmp/rc/$b.txt | tail -1)" >> /tmp/rc/summary.txt ) &
done
wait
cat /tmp/rc/summary.txt >> $R
for b in "$@"; do
  if grep -qE '^========= (Error|Warning|Internal)' /tmp/rc/$b.txt; then
    grep -E '^========= (Error|Warning|Internal)' -A12 /tmp/rc/$b.txt | head -60 >> $R
  else  # no report at all: its passed tests count
    grep -E '^\[       OK' /tmp/rc/$b.txt | awk -v b=$b '{print b, $4}' >> $OUT/racecheck_passed.txt
  fi
done
tar cJf $OUT/rc.tar.xz -C /tmp rc
