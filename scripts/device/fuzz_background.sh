#!/usr/bin/env bash
# Fuzzes the nine parser harnesses of fuzz/ in the background on spare CPU cores of a machine (the
# GPU machine's, beside a call's GPU work), then packs what they found into one file.
#
#   fuzz_background.sh START SECONDS CORES OUTDIR [BUNDLE]
#       starts every harness (libFuzzer, ASan + UBSan, the flags of scripts/fuzz.sh) under
#       `taskset -c` and `nice -n 19` on the cores CORES (a taskset list: 6-15, 0,2,4), for at most
#       SECONDS, and returns at once. One process per harness, more when CORES has 18 or more
#       (floor(cores / 9) each); fewer than 9 cores are shared round-robin. A process that stops at
#       a finding is started again (at most 5 times) until its time is up.
#       When that time is up it collects by itself (as COLLECT, into $OUT/fuzz.tar.xz), so the file
#       comes back even if the call's command is killed before its COLLECT.
#   fuzz_background.sh COLLECT OUTDIR [DEST]
#       stops the harnesses still running (SIGINT: libFuzzer prints its final stats), writes
#       DEST (default $OUT/fuzz.tar.xz, else OUTDIR/fuzz.tar.xz, at most 15 MiB): summary.json,
#       each process's log tail, the findings (crash-/leak-/timeout-/oom-/slow-unit- files) and the
#       new corpus units. scripts/fuzz_import.sh reads it.
#
# BUNDLE: the unpacked carry2/fuzzbins.tar.xz (scripts/device/fuzz_bundle.sh: bin/fuzz_NAME, lib/
# (their shared libraries, searched before /tmp/lib: scripts/device/setup.sh's), root/
# (the files the harnesses read by the absolute path compiled in, named in ROOT), seeds/NAME/ (the
# committed corpus, plus grown/NAME/ when packed). Default: this script's folder when it holds
# bin/, else /tmp/fz/fuzzbins. Both modes exit 0 whatever happens (a failure is written to
# OUTDIR/fuzz_background.log and the summary) and never wait more than about two minutes.
set -u
mode=${1:-}
here=$(cd "$(dirname "$0")" && pwd)
NAMES="serve_request linearization linearization_weights safetensors checkpoint_index config tokenizer_load tokenizer_roundtrip text_data chat_template"
RESTARTS=5

log() { echo "$(date -u +%H:%M:%S) $*" >> "$W/fuzz_background.log"; }

# 6-8,10 -> "6 7 8 10"
expand_cores() {
  local part a b out=()
  IFS=, read -ra parts <<< "$1"
  for part in "${parts[@]}"; do
    if [[ $part =~ ^([0-9]+)-([0-9]+)$ ]]; then
      a=${BASH_REMATCH[1]} b=${BASH_REMATCH[2]}
      for ((c = a; c <= b; c++)); do out+=("$c"); done
    elif [[ $part =~ ^[0-9]+$ ]]; then
      out+=("$part")
    else
      return 1
    fi
  done
  [ ${#out[@]} -gt 0 ] && echo "${out[@]}"
}

# One process of a harness (run under setsid by START): runs the fuzzer until its deadline,
# again after a finding, until OUTDIR/STOP appears.
run_instance() {
  local name=$1 inst=$2 core=$3 deadline=$4 B=$5
  local d=$W/$name inst_log=$W/$name/log.$inst
  local pin=()
  command -v taskset > /dev/null && pin=(taskset -c "$core")
  local grown=()
  [ -d "$B/grown/$name" ] && grown=("$B/grown/$name")
  echo "$(date +%s)" > "$d/start.$inst"
  local runs=0 left rc
  while :; do
    [ -e "$W/STOP" ] && break
    left=$(( deadline - $(date +%s) ))
    [ "$left" -lt 5 ] && break
    runs=$((runs + 1))
    echo "=== run $runs: ${left} s on core $core" >> "$inst_log"
    "${pin[@]}" nice -n 19 "$B/bin/fuzz_$name" "$d/new" "$d/seeds" "${grown[@]}" \
      -max_total_time="$left" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
      -print_final_stats=1 -artifact_prefix="$d/artifacts/" >> "$inst_log" 2>&1 &
    echo $! > "$d/pid.$inst"
    wait $!
    rc=$?
    echo "=== exit $rc" >> "$inst_log"
    [ "$rc" -eq 0 ] && break                       # its time is up
    [ -e "$W/STOP" ] && break                      # interrupted by COLLECT
    [ "$runs" -gt "$RESTARTS" ] && break           # the same finding again and again
    if grep -q "LeakSanitizer has encountered a fatal error" "$inst_log"; then
      export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1
      echo "=== LeakSanitizer cannot work here: detect_leaks=0 from now on" >> "$inst_log"
    fi
  done
  echo "$(date +%s)" > "$d/end.$inst"
  rm -f "$d/pid.$inst"
}

start() {
  local seconds=$1 cores=$2 B=${3:-}
  if [ -z "$B" ]; then
    if [ -d "$here/bin" ]; then B=$here; else B=/tmp/fz/fuzzbins; fi
  fi
  B=$(cd "$B" 2>/dev/null && pwd) || { log "no bundle at ${3:-/tmp/fz/fuzzbins}"; return; }
  [[ $seconds =~ ^[0-9]+$ ]] || { log "SECONDS not a number: $seconds"; return; }
  local list
  list=$(expand_cores "$cores") || { log "CORES not a core list: $cores"; return; }
  read -ra core_list <<< "$list"
  local ncores=${#core_list[@]} per=1
  [ "$ncores" -ge 18 ] && per=$((ncores / 9))
  # The harnesses read fixtures by the absolute path of the tree they were built in (ROOT):
  # give them the bundle's copies there unless that path exists.
  local root
  root=$(cat "$B/ROOT" 2>/dev/null)
  if [ -n "$root" ] && [ ! -e "$root" ]; then
    mkdir -p "$(dirname "$root")" && ln -s "$B/root" "$root" && log "linked $root -> $B/root"
  fi
  export LD_LIBRARY_PATH="$B/lib:/tmp/lib"
  local missing
  missing=$(for n in $NAMES; do ldd "$B/bin/fuzz_$n" 2> /dev/null; done | grep "not found" | sort -u | tr -s " \t\n" " ")
  # A lean bundle expects carry2/libs.tar.xz unpacked in /tmp/lib (setup.sh); unpack it here if not.
  if [ -n "$missing" ] && [ -f carry2/libs.tar.xz ]; then
    mkdir -p "$W/syslibs" && timeout 60 tar -xJf carry2/libs.tar.xz -C "$W/syslibs" \
      && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$W/syslibs/libs" && log "unpacked carry2/libs.tar.xz"
    missing=$(for n in $NAMES; do ldd "$B/bin/fuzz_$n" 2> /dev/null; done | grep "not found" | sort -u | tr -s " \t\n" " ")
  fi
  [ -n "$missing" ] && log "shared libraries not found: $missing"
  # LeakSanitizer needs ptrace; where it cannot work (some sandboxes), fuzz without leak checks.
  local leaks=1
  echo '{}' > "$W/probe.in"
  ASAN_OPTIONS=detect_leaks=1 timeout 60 "$B/bin/fuzz_config" "$W/probe.in" \
    > "$W/probe.log" 2>&1 || log "probe fuzz_config exit $?: $(tail -n 3 "$W/probe.log" | tr '\n' ' ')"
  if grep -q "LeakSanitizer has encountered a fatal error\|LeakSanitizer does not work" "$W/probe.log"; then
    leaks=0
    log "LeakSanitizer does not work here: detect_leaks=0"
  fi
  echo "$leaks" > "$W/detect_leaks"
  export ASAN_OPTIONS=detect_leaks=$leaks:allocator_may_return_null=1
  export UBSAN_OPTIONS=print_stacktrace=1
  export W RESTARTS
  local deadline=$(( $(date +%s) + seconds )) i=0 name inst core
  echo "$seconds" > "$W/seconds"
  echo "$deadline" > "$W/deadline"
  echo "$cores" > "$W/cores"
  for name in $NAMES; do
    [ -x "$B/bin/fuzz_$name" ] || { log "no harness $name"; i=$((i + 1)); continue; }
    mkdir -p "$W/$name/new" "$W/$name/seeds" "$W/$name/artifacts"
    cp -r "$B/seeds/$name/." "$W/$name/seeds/" 2>/dev/null
    for ((inst = 0; inst < per; inst++)); do
      core=${core_list[$(( (inst * 9 + i) % ncores ))]}
      setsid nohup bash "$here/fuzz_background.sh" _RUN "$name" "$inst" "$core" "$deadline" "$B" \
        < /dev/null > /dev/null 2>&1 &
      echo $! > "$W/$name/wrapper.$inst"
    done
    i=$((i + 1))
  done
  log "started $((9 * per)) processes on cores $cores for $seconds s (bundle $B, detect_leaks=$leaks)"
}

# Executions of one process log: the sum over its runs of libFuzzer's final stat, or of the last
# "#N" status line of a run that printed none (killed).
log_execs() {
  awk '/^=== run/ { total += (final ? final : last); final = 0; last = 0 }
       /^#[0-9]+/ { n = substr($1, 2) + 0; if (n > last) last = n }
       /stat::number_of_executed_units:/ { final = $2 + 0 }
       END { total += (final ? final : last); print total + 0 }' "$1"
}

collect() {
  local dest=$1 name inst p pids=()
  touch "$W/STOP"
  for p in "$W"/*/pid.*; do
    [ -e "$p" ] || continue
    pids+=("$(cat "$p")")
  done
  [ ${#pids[@]} -gt 0 ] && kill -INT "${pids[@]}" 2> /dev/null
  # Up to 20 s for the final stats, then the rest of each process group goes.
  for ((t = 0; t < 40; t++)); do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2> /dev/null && alive=1; done
    [ "$alive" -eq 0 ] && break
    sleep 0.5
  done
  for p in "$W"/*/wrapper.*; do
    [ -e "$p" ] || continue
    kill -KILL -- "-$(cat "$p")" 2> /dev/null
  done
  sleep 0.5
  local now; now=$(date +%s)
  local P=$W/pack/fuzz
  rm -rf "$W/pack"; mkdir -p "$P/logs" "$P/artifacts" "$P/corpus"
  cp "$W/fuzz_background.log" "$W/probe.log" "$P/" 2> /dev/null
  local json
  json="{\"host\": \"$(cat /proc/sys/kernel/hostname 2>/dev/null)\", \"collected_utc\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\", \"cores\": \"$(cat "$W/cores" 2>/dev/null)\", \"seconds_asked\": $(cat "$W/seconds" 2>/dev/null || echo 0), \"detect_leaks\": $(cat "$W/detect_leaks" 2>/dev/null || echo 1), \"harnesses\": {"
  local first=1
  for name in $NAMES; do
    local d=$W/$name
    [ -d "$d" ] || continue
    local execs=0 secs=0 procs=0 s e
    for p in "$d"/log.*; do
      [ -e "$p" ] || continue
      inst=${p##*.}
      procs=$((procs + 1))
      execs=$((execs + $(log_execs "$p")))
      s=$(cat "$d/start.$inst" 2> /dev/null || echo "$now")
      e=$(cat "$d/end.$inst" 2> /dev/null || echo "$now")
      secs=$((secs + e - s))
      tail -n 40 "$p" > "$P/logs/$name.$inst.txt"
    done
    local new=0 art=() a
    new=$(find "$d/new" -type f 2> /dev/null | wc -l)
    mkdir -p "$P/corpus/$name" "$P/artifacts/$name"
    cp "$d"/new/* "$P/corpus/$name/" 2> /dev/null
    for a in "$d"/artifacts/*; do
      [ -f "$a" ] || continue
      art+=("$(basename "$a")")
      head -c 1048576 "$a" > "$P/artifacts/$name/$(basename "$a")"
    done
    local crashes=0 timeouts=0 ooms=0 leaks=0 other=0 names_json=""
    for a in "${art[@]}"; do
      case $a in
        crash-*) crashes=$((crashes + 1)) ;;
        timeout-*) timeouts=$((timeouts + 1)) ;;
        oom-*) ooms=$((ooms + 1)) ;;
        leak-*) leaks=$((leaks + 1)) ;;
        *) other=$((other + 1)) ;;
      esac
      names_json+="${names_json:+, }\"$a\""
    done
    [ $first -eq 1 ] || json+=","
    first=0
    json+=$'\n'"  \"$name\": {\"executions\": $execs, \"seconds\": $secs, \"cores\": $procs, \"new_units\": $new, \"crashes\": $crashes, \"timeouts\": $timeouts, \"ooms\": $ooms, \"leaks\": $leaks, \"other_artifacts\": $other, \"artifacts\": [$names_json]}"
  done
  json+=$'\n'"}}"
  echo "$json" > "$P/summary.json"
  # At most 15 MiB: drop the largest new units (half of what is left each time) until it fits.
  local limit=$((15 * 1048576))
  mkdir -p "$(dirname "$dest")"
  for _ in 1 2 3 4 5 6; do
    if timeout 90 tar -C "$W/pack" -cf - fuzz | timeout 90 xz -9 -T 4 > "$dest.tmp" 2> /dev/null \
       && [ "$(stat -c %s "$dest.tmp")" -le "$limit" ]; then
      mv "$dest.tmp" "$dest"
      return
    fi
    local files n
    files=$(find "$P/corpus" -type f -printf '%s %p\n' | sort -rn)
    n=$(echo "$files" | grep -c .)
    [ "$n" -eq 0 ] && { rm -rf "$P/logs"; continue; }
    echo "$files" | head -n $(( (n + 1) / 2 )) | cut -d' ' -f2- | xargs -r rm -f
    echo "dropped the $(( (n + 1) / 2 )) largest new units to fit" >> "$P/fuzz_background.log"
  done
  rm -f "$dest.tmp"
}

# collect, at most about three minutes whatever happens, once at a time (the lock): START's
# automatic collection at the deadline, or COLLECT.
collect_bounded() {
  export -f collect log_execs log
  export W NAMES
  timeout -k 5 170 bash -c "collect '$1'" || echo "fuzz_background: collection did not finish" >&2
}

case $mode in
  START)
    [ $# -ge 4 ] || { echo "usage: $0 START SECONDS CORES OUTDIR [BUNDLE]" >&2; exit 0; }
    W=$4
    mkdir -p "$W" || exit 0
    W=$(cd "$W" && pwd)
    rm -rf "$W/STOP" "$W/collect.lock" "$W/deadline"
    start "$2" "$3" "${5:-}"
    # Should the call's command be killed before its COLLECT, $OUT still gets the file: written
    # when the harnesses' time is up (choose SECONDS to end inside the command's limit).
    if [ -f "$W/deadline" ]; then
      setsid nohup bash "$here/fuzz_background.sh" _AUTO "$W" "${OUT:-$W}/fuzz.tar.xz" \
        < /dev/null > /dev/null 2>&1 &
      echo $! > "$W/auto.pid"
    fi
    exit 0 ;;
  COLLECT)
    [ $# -ge 2 ] || { echo "usage: $0 COLLECT OUTDIR [DEST]" >&2; exit 0; }
    W=$2
    [ -d "$W" ] || { echo "fuzz_background: no $W" >&2; exit 0; }
    W=$(cd "$W" && pwd)
    dest=${3:-${OUT:-$W}/fuzz.tar.xz}
    # Wait (at most 2 minutes) for an automatic collection under way, then stop the collector.
    for ((t = 0; t < 120; t++)); do mkdir "$W/collect.lock" 2> /dev/null && break; sleep 1; done
    [ -f "$W/auto.pid" ] && kill -KILL -- "-$(cat "$W/auto.pid")" 2> /dev/null
    collect_bounded "$dest"
    rm -rf "$W/collect.lock"
    exit 0 ;;
  _AUTO)
    W=$2
    while [ "$(date +%s)" -lt $(( $(cat "$W/deadline") + 3 )) ]; do sleep 2; done
    mkdir "$W/collect.lock" 2> /dev/null || exit 0
    collect_bounded "$3"
    rm -rf "$W/collect.lock"
    exit 0 ;;
  _RUN)
    run_instance "$2" "$3" "$4" "$5" "$6"
    exit 0 ;;
  *)
    echo "usage: $0 START SECONDS CORES OUTDIR [BUNDLE] | COLLECT OUTDIR [DEST]" >&2
    exit 0 ;;
esac
