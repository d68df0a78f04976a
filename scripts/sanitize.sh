#!/usr/bin/env bash
# The CPU suite under AddressSanitizer + UndefinedBehaviorSanitizer: builds into build-asan
# (GOLINEAR_SANITIZE=ON, no CUDA, no benchmarks) and runs ctest there; any finding fails its test.
#
# usage: scripts/sanitize.sh [-j JOBS] [CTEST ARGS...]
#   scripts/sanitize.sh                      the whole CPU suite (ctest -LE gpu)
#   scripts/sanitize.sh -j 8 -R 'Cli|Train'  a subset
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=2
if [ "${1:-}" = "-j" ]; then jobs=$2; shift 2; fi
cmake -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGOLINEAR_CUDA=OFF \
  -DGOLINEAR_BENCH=OFF -DGOLINEAR_SANITIZE=ON >/dev/null
cmake --build build-asan -j "$jobs"
# Findings end the process with a report (the tests see a failure); leaks are findings too.
export ASAN_OPTIONS=abort_on_error=0:halt_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
start=$(date +%s)
status=0
ctest --test-dir build-asan -LE gpu -j "$jobs" --output-on-failure --timeout 1800 "$@" || status=$?
echo "sanitize.sh: ctest under ASan+UBSan took $(( $(date +%s) - start )) s, exit $status"
exit $status
