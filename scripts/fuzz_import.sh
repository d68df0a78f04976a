#!/usr/bin/env bash
# Takes in what scripts/device/fuzz_background.sh brought back from a machine (fuzz.tar.xz):
#  - prints its summary (per harness: executions, seconds, processes, new units, findings);
#  - findings (crash-/leak-/timeout-/oom-/slow-unit-) go to build-fuzz/crashes/NAME/ for triage
#    (replay one: build-fuzz/fuzz/fuzz_NAME FILE);
#  - new corpus units go to build-fuzz/corpus/NAME/ (the working corpus of scripts/fuzz.sh), and
#    into the committed fuzz/corpus/NAME/ only those that add coverage to it (libFuzzer's
#    -merge=1 over the committed corpus), at most CAP per harness (the smallest first);
#  - appends the numbers to build-fuzz/fuzz_tally.md: a table in the style of
#    docs/RELIABILITY.md's fuzzing sessions and the new cumulative totals (the running sums are
#    kept in build-fuzz/fuzz_tally.sums; the baseline is docs/RELIABILITY.md's last "Cumulative
#    over the sessions" line, read when the tally starts; delete both files to start over).
#
# usage: scripts/fuzz_import.sh FUZZ_TAR_XZ [--bins DIR] [--cap N] [--label TEXT]
#   --bins DIR   the harness binaries used for the merge (default build-fuzz/fuzz; scripts/fuzz.sh
#                builds them)
#   --cap N      most units added to each fuzz/corpus/NAME per import (default 40)
#   --label TEXT what the run was, for the tally (default "a GPU-machine call")
set -euo pipefail
cd "$(dirname "$0")/.."
tarball=${1:?usage: scripts/fuzz_import.sh FUZZ_TAR_XZ [--bins DIR] [--cap N] [--label TEXT]}
shift
bins=build-fuzz/fuzz cap=40 label="a GPU-machine call"
while [ $# -gt 0 ]; do
  case $1 in
    --bins) bins=${2:?--bins needs a folder}; shift 2 ;;
    --cap) cap=${2:?--cap needs a number}; shift 2 ;;
    --label) label=${2:?--label needs a text}; shift 2 ;;
    *) echo "fuzz_import: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $cap =~ ^[0-9]+$ ]] || { echo "fuzz_import: --cap must be a number, not $cap" >&2; exit 2; }
[ -f "$tarball" ] || { echo "fuzz_import: no file $tarball" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xJf "$tarball" -C "$tmp" || { echo "fuzz_import: $tarball is not a tar.xz" >&2; exit 2; }
F=$tmp/fuzz
[ -f "$F/summary.json" ] || { echo "fuzz_import: $tarball holds no fuzz/summary.json" >&2; exit 2; }

# 1234567 -> 1,234,567
commas() { echo "$1" | sed -e :a -e 's/\(.*[0-9]\)\([0-9]\{3\}\)/\1,\2/;ta'; }
# One harness's field from summary.json (written by fuzz_background.sh: one harness a line).
field() { grep "^  \"$1\":" "$F/summary.json" | grep -o "\"$2\": [0-9]*" | grep -o '[0-9]*$' || echo 0; }
names=$(grep -o '^  "[a-z_]*":' "$F/summary.json" | tr -d ' ":')
head_line=$(head -1 "$F/summary.json")
cores=$(echo "$head_line" | sed -n 's/.*"cores": "\([^"]*\)".*/\1/p')
when=$(echo "$head_line" | sed -n 's/.*"collected_utc": "\([^"]*\)".*/\1/p')
date=${when%%T*}
leaks=$(echo "$head_line" | sed -n 's/.*"detect_leaks": \([0-9]\).*/\1/p')

export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1
mkdir -p build-fuzz
rows=() total_execs=0 total_secs=0 total_found=0
printf '%-20s %12s %8s %6s %6s %6s  %s\n' harness executions seconds procs new kept findings
for n in $names; do
  execs=$(field "$n" executions) secs=$(field "$n" seconds) procs=$(field "$n" cores)
  new=$(field "$n" new_units)
  # findings
  found=()
  if [ -d "$F/artifacts/$n" ] && [ -n "$(ls -A "$F/artifacts/$n")" ]; then
    mkdir -p "build-fuzz/crashes/$n"
    for a in "$F/artifacts/$n"/*; do
      cp "$a" "build-fuzz/crashes/$n/"
      found+=("$(basename "$a")")
    done
  fi
  # new units: all into the working corpus, those adding coverage (at most cap) into the committed one
  kept=0
  if [ -d "$F/corpus/$n" ] && [ -n "$(ls -A "$F/corpus/$n")" ]; then
    mkdir -p "build-fuzz/corpus/$n"
    cp -n "$F/corpus/$n"/* "build-fuzz/corpus/$n/"
    if [ -x "$bins/fuzz_$n" ]; then
      m=$tmp/merge_$n
      mkdir -p "$m"
      cp fuzz/corpus/"$n"/* "$m"/ 2> /dev/null || true
      ls "$m" | sort > "$tmp/before_$n"
      if timeout 600 "$bins/fuzz_$n" -merge=1 -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
           "$m" "$F/corpus/$n" > "$tmp/merge_$n.log" 2>&1; then
        ls "$m" | sort | comm -13 "$tmp/before_$n" - > "$tmp/added_$n" || true
        while read -r f; do
          cp "$m/$f" "fuzz/corpus/$n/$f"
          kept=$((kept + 1))
        done < <(cd "$m" && xargs -r ls -S -r < "$tmp/added_$n" > "$tmp/bysize_$n"; head -n "$cap" "$tmp/bysize_$n")
      else
        echo "fuzz_import: merge for $n failed (log: $(tail -1 "$tmp/merge_$n.log")); nothing added to fuzz/corpus/$n" >&2
      fi
    else
      echo "fuzz_import: no $bins/fuzz_$n (scripts/fuzz.sh builds it): nothing added to fuzz/corpus/$n" >&2
    fi
  fi
  if [ ${#found[@]} -eq 0 ]; then fdesc=0; else fdesc="**${#found[@]}: ${found[*]}**"; fi
  printf '%-20s %12s %8s %6s %6s %6s  %s\n' "$n" "$execs" "$secs" "$procs" "$new" "$kept" "${found[*]:-none}"
  rows+=("| $n | $date | $secs | $procs | $(commas "$execs") | $new ($kept kept) | $fdesc |")
  total_execs=$((total_execs + execs)) total_secs=$((total_secs + secs))
  total_found=$((total_found + ${#found[@]}))
done
nh=$(echo "$names" | wc -w)
echo "total: $total_execs executions in $total_secs process-seconds, $total_found findings"
echo "findings in build-fuzz/crashes/NAME/; replay with build-fuzz/fuzz/fuzz_NAME FILE"

# The tally: baseline (from docs/RELIABILITY.md at the first import) + every import's sums.
sums=build-fuzz/fuzz_tally.sums tally=build-fuzz/fuzz_tally.md
if [ ! -f "$sums" ]; then
  line=$(grep "Cumulative over the sessions" docs/RELIABILITY.md | tail -1)
  base_m=$(echo "$line" | sed -n 's/.*≈ \([0-9.]*\) M executions.*/\1/p')
  base_h=$(echo "$line" | sed -n 's/.*≈ \([0-9.]*\) hours.*/\1/p')
  echo "base_m=${base_m:-0} base_h=${base_h:-0} dev_execs=0 dev_secs=0 imports=0" > "$sums"
fi
# shellcheck disable=SC1090
eval "$(cat "$sums")"
dev_execs=$((dev_execs + total_execs)) dev_secs=$((dev_secs + total_secs)) imports=$((imports + 1))
echo "base_m=$base_m base_h=$base_h dev_execs=$dev_execs dev_secs=$dev_secs imports=$imports" > "$sums"
{
  echo
  echo "Device fuzzing $imports (\`scripts/device/fuzz_background.sh\` beside $label, collected $when,"
  echo "cores $cores of the H200 host, nice 19; one process per harness unless 'cores' says more;"
  echo "detect_leaks=$leaks). Seconds: process-seconds (cores × wall time); new: units libFuzzer"
  echo "added, kept: those that added coverage to the committed corpus (\`scripts/fuzz_import.sh\`,"
  echo "at most $cap a harness):"
  echo
  echo "| harness | date | seconds | cores | executions | new corpus units | findings |"
  echo "|---|---|---:|---:|---:|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  awk -v e="$total_execs" -v s="$total_secs" -v f="$total_found" 'BEGIN {
    printf "%.1f M executions in %.1f hours of fuzzing on H200 host CPU cores, %d findings.\n", e / 1e6, s / 3600, f }'
  awk -v bm="$base_m" -v bh="$base_h" -v de="$dev_execs" -v ds="$dev_secs" -v nh="$nh" 'BEGIN {
    m = bm + de / 1e6; h = bh + ds / 3600
    printf "Cumulative over the sessions: ≈ %.0f M executions in ≈ %.1f hours of fuzzing (≈ %.0f minutes per\n", m, h, h * 60 / nh
    printf "harness), %.1f hours of them on H200 host CPU cores.\n", ds / 3600 }'
} >> "$tally"
echo "appended to $tally:"
tail -n $(( ${#rows[@]} + 13 )) "$tally"
