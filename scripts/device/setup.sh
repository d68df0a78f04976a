# Sourced by each call of this folder, from the repository root on the GPU machine: unpacks
# carry2/ (libs, bins, fixtures, the model moved out of the tree; kernel_timeline.cpp's library
# and libcupti.so.13 when carried), links the tree at /work/main (the absolute paths compiled
# into the tests), makes /tmp/r, and defines R (the results file), G (golinear), CFG (the 8B
# bench config), T1 (cores 0-7), el (seconds since the start), health PORT and serve_load MODEL P... (golinear serve
# --device cuda under golinear_serve_load, 64 streams, one run per prompt length P, then the
# server's prompt-token counters from /metrics).
T0=$(date +%s)
mkdir -p /tmp/lib /work && tar xJf carry2/libs.tar.xz -C /tmp && cp /tmp/libs/* /tmp/lib/
tar xJf carry2/bins.tar.xz -C /tmp
mkdir -p /tmp/fx && tar xJf carry2/fixtures.tar.xz -C /tmp/fx && export GOLINEAR_GPU_FIXTURES=/tmp/fx/fixtures
[ -f carry2/model.tar.xz ] && tar xJf carry2/model.tar.xz -C .
ln -sfn "$PWD" /work/main
export LD_LIBRARY_PATH=/tmp/lib:/usr/local/cuda/lib64
R=$OUT/results.txt; G=/tmp/bins/golinear
CFG=bench/configs/llama-3.1-8b.json; T1="taskset -c 0-7"
mkdir -p /tmp/r
[ -f carry2/libkernel_timeline.so ] && cp carry2/libkernel_timeline.so carry2/libcupti.so.13 /tmp/lib/
el() { echo $(( $(date +%s) - T0 )); }
echo "setup $(el) s" > $R
health() {
  for i in $(seq 1 60); do
    python3 -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$1/health').status == 200 else 1)" 2>/dev/null && return 0
    sleep 1
  done
  return 1
}
serve_load() {
  local m=$1; shift
  $G serve $m --device cuda --parallel 64 --port 8090 >> $OUT/logs.txt 2>&1 &
  local sp=$!
  health 8090 || echo "server $m not healthy" >> $R
  for P in "$@"; do
    timeout 40 /tmp/bins/golinear_serve_load http://127.0.0.1:8090 --concurrency 64 --requests 2 --max-tokens 128 --prompt-tokens $P >> $R 2>&1
    echo "load $m P=$P exit $? at $(el) s" >> $R
  done
  curl -s http://127.0.0.1:8090/metrics 2>/dev/null | grep -E "^golinear_prompt_tokens" >> $R
  kill -TERM $sp; wait $sp; echo "serve $m exit $?" >> $R
}
# mixers_ab PATTERN NAME:BINARY[:ARGS]...: `bench --mixers` at 8K, 16K, 32K of each binary (with
# its ARGS, then $MIXERS_ARGS), rounds $FIRST_ROUND (default 1) to $ROUNDS (default 2) alternated
# (cores 0-7), into /tmp/r/mixers_NAME_ROUND.txt; into $R the values of the rows matching PATTERN
# (an extended regex over the table's lines).
mixers_ab() {
  local pattern=$1; shift
  mkdir -p /tmp/r
  for rep in $(seq ${FIRST_ROUND:-1} ${ROUNDS:-2}); do
    for b in "$@"; do
      local name=${b%%:*} rest=${b#*:} args=""
      [ "${rest#*:}" != "$rest" ] && args=${rest#*:}
      local out=/tmp/r/mixers_${name}_$rep.txt
      taskset -c 0-7 timeout 100 ${rest%%:*} bench --mixers --seq 8192,16384,32768 --contexts 4096 $args $MIXERS_ARGS > $out 2>&1
      echo "$name rep $rep exit $? at $(el) s: $(grep -E "$pattern" $out |
        awk '{for (i = 1; i < NF; ++i) if ($i == "ms") { print $(i + 2); break }}' | tr '\n' ' ')" >> $R
    done
  done
}
# plain_tests BINARY...: each GPU test binary of /tmp/bins (or of $BIN_DIR: a variant's) plainly
# (cores 0-7, extra gtest arguments in $TEST_ARGS), into /tmp/r/BINARY.txt; its summary and
# failures into $R; fails unless every binary passed (a call runs `plain_tests X || exit 0` to
# stop before its measurements when a new kernel's tests fail).
plain_tests() {
  mkdir -p /tmp/r
  local ok=0
  for t in "$@"; do
    taskset -c 0-7 timeout 200 ${BIN_DIR:-/tmp/bins}/$t ${TEST_ARGS:+"$TEST_ARGS"} > /tmp/r/$t.txt 2>&1
    echo "$t exit $? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' /tmp/r/$t.txt | tr '\n' ' ')" >> $R
    grep -E '^\[  FAILED|Failure' /tmp/r/$t.txt | head -10 >> $R
    grep -q '^\[  PASSED' /tmp/r/$t.txt && ! grep -q '^\[  FAILED' /tmp/r/$t.txt || ok=1
  done
  return $ok
}
# gpu_tests: every GPU test binary of /tmp/bins (plain_tests; not the trained-student tests,
# whose bundled model a call does not always carry).
gpu_tests() {
  TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests test_ops_cuda test_kernels_cuda \
    test_attention_cuda test_gated_delta_cuda test_gated_linear_cuda test_mixers_cuda \
    test_model_cuda test_runtime_cuda test_eval_cuda test_analysis_cuda test_train_cuda
}
# decode_probe NAME BINARY PATTERN [LINES]: batch-1 8B hybrid decode steps of BINARY (a build
# that prints a diagnostic: phase stamps, block times) into /tmp/r/probe_NAME.txt; its bench rows
# and the first LINES (default 16) lines matching PATTERN into $R.
decode_probe() {
  $T1 timeout 60 $2 bench --config $CFG --batches 1 --contexts 4096 --variants hybrid \
    --decode-repeats 20 > /tmp/r/probe_$1.txt 2>&1
  echo "probe $1 exit $? at $(el) s" >> $R
  grep -E "^bench:|error" /tmp/r/probe_$1.txt >> $R; grep -E "$3" /tmp/r/probe_$1.txt | head -${4:-16} >> $R
}
# ops_first PATTERN: test_ops_cuda of /tmp/bins alone (cut at 60 s) into /tmp/r/ops.txt, its
# summary and the lines matching PATTERN or a failure into $R; fails unless it passed — a call
# testing a new kernel runs `ops_first gemv || exit 0` before anything that could hang on it.
ops_first() {
  $T1 timeout 60 /tmp/bins/test_ops_cuda > /tmp/r/ops.txt 2>&1
  echo "test_ops_cuda exit $? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' /tmp/r/ops.txt | tr '\n' ' ')" >> $R
  grep -E "$1|FAILED|Failure" /tmp/r/ops.txt | head -24 >> $R
  grep -q "PASSED" /tmp/r/ops.txt && ! grep -q "FAILED" /tmp/r/ops.txt
}
# transfer_ab NAME:BINARY...: the 8B attention transfer (4K tokens, 24 steps) of each binary,
# two rounds alternated (cores 0-7), into /tmp/r/transfer_NAME_ROUND.txt; tokens/s into $R.
transfer_ab() {
  mkdir -p /tmp/r
  for rep in 1 2; do
    for b in "$@"; do
      local out=/tmp/r/transfer_${b%%:*}_$rep.txt
      taskset -c 0-7 timeout 100 ${b#*:} bench --transfer --config bench/configs/llama-3.1-8b.json \
        --seq-len 4096 --steps 24 > $out 2>&1
      echo "transfer ${b%%:*} rep $rep exit $? at $(el) s: $(grep -oE '[0-9]+ tokens/s.*per 10 M tokens\)' $out)" >> $R
    done
  done
}
# decode_ab BATCHES NAME:BINARY...: the 8B decode step at 4K context (both variants) for the
# sequence counts BATCHES of each binary, $ROUNDS rounds (default 2) alternated (cores 0-7; each
# run cut at $DECODE_TIMEOUT s, default 120), into /tmp/r/decode_NAME_ROUND.txt; its rows into $R.
decode_ab() {
  local batches=$1; shift
  for rep in $(seq 1 ${ROUNDS:-2}); do
    for b in "$@"; do
      local out=/tmp/r/decode_${b%%:*}_$rep.txt
      $T1 timeout ${DECODE_TIMEOUT:-120} ${b#*:} bench --config $CFG --batches $batches --contexts 4096 --decode-repeats 20 > $out 2>&1
      echo "decode ${b%%:*} rep $rep exit $? at $(el) s" >> $R; grep -E "^bench:|error" $out >> $R
    done
  done
}
# contexts_ab NAME:BINARY...: the whole-model table's batch-1 decode rows at 4K / 32K / 128K (no
# prefill: random caches) of each binary, $ROUNDS rounds (default 1) alternated, into
# /tmp/r/ctx_NAME_ROUND.txt; its rows into $R.
contexts_ab() {
  for rep in $(seq 1 ${ROUNDS:-1}); do
    for b in "$@"; do
      local out=/tmp/r/ctx_${b%%:*}_$rep.txt
      $T1 timeout 90 ${b#*:} bench --config $CFG --contexts 4096,32768,131072 --prefill-max 0 \
        --decode-repeats 20 > $out 2>&1
      echo "contexts ${b%%:*} rep $rep exit $? at $(el) s" >> $R; grep -E "^bench:|error" $out >> $R
    done
  done
}
long_ab() {  # NAME:BINARY ...: 600 batch-1 hybrid steps of each (the power-capped regime), ROUNDS (2) rounds
  for rep in $(seq 1 ${ROUNDS:-2}); do
    for b in "$@"; do
      local out=/tmp/r/long_${b%%:*}_$rep.txt
      $T1 timeout 60 ${b#*:} bench --config $CFG --variants hybrid --batches 1 --contexts 4096 --decode-repeats 600 > $out 2>&1
      echo "long ${b%%:*} rep $rep: $(grep -E '^bench:|error' $out)" >> $R
    done
  done
}
power_probe() {  # NAME BINARY: nvidia-smi every 20 ms beside 600 batch-1 hybrid steps; samples above 250 W summarised
  local smi=/usr/local/nvidia/bin/nvidia-smi
  $smi --query-gpu=clocks.sm,clocks.mem,power.draw.instant,clocks_event_reasons.active,temperature.gpu \
    --format=csv,noheader,nounits -lms 20 > /tmp/r/smi_$1.txt 2>&1 &
  local pid=$!
  $T1 timeout 60 $2 bench --config $CFG --variants hybrid --batches 1 --contexts 4096 --decode-repeats 600 > /tmp/r/pp_$1.txt 2>&1
  kill $pid; sleep 0.2
  echo "power $1: $(grep -E '^bench:' /tmp/r/pp_$1.txt)" >> $R
  awk -F', *' -v n=$1 '$3+0 > 250 {k++; c+=$1; p+=$3; r[$4]++; if ($3>pm) pm=$3}
    END {printf "  %s: %d samples > 250 W: mean SM %.0f MHz, mean %.0f W, max %.0f W, reasons:", n, k, c/k, p/k, pm;
         for (x in r) printf " %s×%d", x, r[x]; print ""}' /tmp/r/smi_$1.txt >> $R
}
# gemv_micro: scripts/device/gemv_micro.cu's binary ($V/gemv_micro: unpack_extra first) into
# /tmp/r/gemv_micro.txt and $R.
gemv_micro() {
  $T1 timeout 120 $V/gemv_micro 20 > /tmp/r/gemv_micro.txt 2>&1
  echo "gemv_micro exit $? at $(el) s" >> $R; cat /tmp/r/gemv_micro.txt >> $R
}
# sanitize: compute-sanitizer over the lines "TOOL BINARY GTEST_FILTER" of stdin (binaries of
# /tmp/bins), one process each, $SAN_JOBS at a time (default 12: each holds up to ≈ 8 GiB of host
# memory) on cores 2-15, each cut at $SAN_TIMEOUT s (default 420); logs into /tmp/san, a line each
# (exit, gtest summary, sanitizer summary) into $R.
san_one() {  # TOOL BINARY TEST
  local log=/tmp/san/$1_$2_${3//\//_}.txt
  timeout -s INT -k 10 ${SAN_TIMEOUT:-420} /usr/local/cuda/bin/compute-sanitizer --tool $1 \
    --error-exitcode 9 /tmp/bins/$2 --gtest_filter="$3" > $log 2>&1
  echo "$1 $2 $3 exit $?: $(grep -E '^\[  (PASSED|FAILED)|SUMMARY' $log | tr '\n' ' ')"
}
sanitize() {
  mkdir -p /tmp/san
  export -f san_one
  taskset -c 2-15 xargs -P ${SAN_JOBS:-12} -L 1 bash -c 'san_one "$@"' _ >> $R
}
decode_sanitize() {  # racecheck of the split decode kernel's tests and memcheck of the hybrid mixer tests (300 s each), beside every GPU test binary
  gpu_tests &
  local r2=Recipes/GpuHybridMixerRecipes.ForwardDecodeAndEveryGradientMatchTheCpuMixer
  printf '%s\n' "racecheck test_mixers_cuda $r2/default" "racecheck test_mixers_cuda $r2/d128_gqa4_lse_split" \
    "racecheck test_mixers_cuda $r2/split_window_8_d128" "racecheck test_mixers_cuda $r2/d128_gqa4_odd_hidden_lse" \
    "racecheck test_mixers_cuda GpuHybridMixer.SplitIsTheExactBranchUntilATokenLeavesTheExactSet" \
    "memcheck test_mixers_cuda *GpuHybridMixer*" |
    SAN_JOBS=6 SAN_TIMEOUT=300 sanitize
  wait
}
# timeline NAME BINARY: the in-graph kernel times of batch-1 hybrid 8B decode steps
# (kernel_timeline.cpp, carried as libkernel_timeline.so) into /tmp/r/timeline_NAME.txt and $R.
timeline() {
  CUDA_INJECTION64_PATH=/tmp/lib/libkernel_timeline.so KERNEL_TIMELINE_OUT=/tmp/r/timeline_$1.txt \
    $T1 timeout 120 $2 bench --config $CFG --batches 1 --contexts 4096 --variants hybrid --decode-repeats 20 > /tmp/r/tl_decode_$1.txt 2>&1
  echo "timeline $1 exit $? at $(el) s" >> $R; grep -E "^bench:|error" /tmp/r/tl_decode_$1.txt >> $R
  cat /tmp/r/timeline_$1.txt >> $R
}
# mixers_timeline NAME BINARY: every kernel of `bench --mixers` at 8K-32K (kernel_timeline.cpp with
# KERNEL_TIMELINE_ALL=1) into /tmp/r/timeline_mixers_NAME.txt; the attention and GDN kernels into $R.
mixers_timeline() {
  KERNEL_TIMELINE_ALL=1 CUDA_INJECTION64_PATH=/tmp/lib/libkernel_timeline.so KERNEL_TIMELINE_OUT=/tmp/r/timeline_mixers_$1.txt \
    $T1 timeout 150 $2 bench --mixers --seq 8192,16384,32768 --contexts 4096 > /tmp/r/mixers_tl_$1.txt 2>&1
  echo "mixers timeline $1 exit $? at $(el) s" >> $R
  grep -E "flash|gdn" /tmp/r/timeline_mixers_$1.txt | head -40 >> $R
}
# sdpa_anchors: anchors_attention.py (PyTorch SDPA at 8K-32K, the machine's own Python) into $R.
sdpa_anchors() {
  (unset LD_LIBRARY_PATH; $T1 timeout 90 python3 scripts/device/anchors_attention.py >> $R 2>&1)
  echo "anchors exit $? at $(el) s" >> $R
}
# unpack_extra [fla]: carry2/extra.tar.xz (a call's variant binaries, as vbins/) into /tmp/vt, V its
# vbins folder; with `fla`, also carry2/fla.tar.xz (../shared/anchors' flash-linear-attention
# snapshot) into /tmp/fla.
unpack_extra() {
  mkdir -p /tmp/vt && tar xJf carry2/extra.tar.xz -C /tmp/vt && V=/tmp/vt/vbins
  if [ "$1" = fla ]; then mkdir -p /tmp/fla && tar -xJf carry2/fla.tar.xz -C /tmp/fla --strip-components=1; fi
}
# fla_anchor: anchors_gdn.py (fla's GDN forward at 8K-32K, the machine's own Python; unpack_extra
# fla first) into $R.
fla_anchor() {
  (unset LD_LIBRARY_PATH; FLA_DIR=/tmp/fla $T1 timeout 150 python3 scripts/device/anchors_gdn.py >> $R 2>&1)
  echo "fla exit $? at $(el) s" >> $R
}
# gdn_timelines NAME BINARY [ARGS...]: every kernel of `bench --mixers --no-backward` at 16K and 32K
# (kernel_timeline.cpp, KERNEL_TIMELINE_ALL=1) with ARGS, once per mode of $GDN_MODES (default
# "seg1 default": the GDN pipeline off, --gdn-segments 1, so that the prepares and the state pass
# run alone; then the default persistent forward), into /tmp/r/tl_NAME_MODE.txt; the GDN kernels
# and rows into $R.
gdn_timelines() {
  local n=$1 bin=$2; shift 2
  for m in ${GDN_MODES:-seg1 default}; do
    local opt=""; [ $m = seg1 ] && opt="--gdn-segments 1"
    KERNEL_TIMELINE_ALL=1 CUDA_INJECTION64_PATH=/tmp/lib/libkernel_timeline.so KERNEL_TIMELINE_OUT=/tmp/r/tl_${n}_$m.txt \
      $T1 timeout 100 $bin bench --mixers --seq 16384,32768 --contexts 4096 --no-backward "$@" $opt > /tmp/r/m_${n}_$m.txt 2>&1
    echo "timeline $n $m exit $? at $(el) s" >> $R
    grep -E "gdn" /tmp/r/tl_${n}_$m.txt >> $R; grep -E "gated deltanet|hybrid \(gdn" /tmp/r/m_${n}_$m.txt | cut -c1-100 >> $R
  done
}
# ncu_profile NAME REGEX COUNT COMMAND...: Nsight Compute (boost clocks; the sections of
# $NCU_SECTIONS, default $NCU_FULL: with per-instruction counters) of the first COUNT kernels
# matching REGEX that COMMAND launches; the details page into /tmp/r/det_NAME.txt, the source page
# as CSV into /tmp/r/src_NAME.csv, the summary lines into $R (the report itself is removed: only
# few files come back from a call).
NCU=/usr/local/cuda/bin/ncu
NCU_FULL="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats --section SourceCounters"
ncu_profile() {
  local n=$1 re=$2 c=$3; shift 3
  $T1 timeout 120 $NCU --clock-control none ${NCU_SECTIONS:-$NCU_FULL} -k "regex:$re" -c $c -f -o /tmp/r/$n "$@" > /tmp/r/ncu_run_$n.txt 2>&1
  echo "ncu $n exit $? at $(el) s" >> $R
  $NCU --import /tmp/r/$n.ncu-rep --page details --print-units base > /tmp/r/det_$n.txt 2>&1
  $NCU --import /tmp/r/$n.ncu-rep --page source --csv --print-units base > /tmp/r/src_$n.csv 2>&1
  grep -E "^  [a-zA-Z_].*\(|Duration|Throughput|Issued Ipc|Eligible Warps|Achieved Occupancy|Registers|wavefronts" /tmp/r/det_$n.txt | cut -c1-160 | head -40 >> $R
  rm -f /tmp/r/$n.ncu-rep
}
