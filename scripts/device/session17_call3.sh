#!/bin/bash
# Session 17, call 3 (carry: bins.tar.xz = main's binaries at bc124fd; extra.tar.xz as vbins/:
# golinear = this tree (the prepare kernel's step 1 as template units over balanced warps, P
# computed beside the diagonal inverse, e^x by ex2.approx), golinear_prepexpf = the same with
# expf (-DGL_PREP_EXPF), this tree's test_gated_delta/mixers/train_cuda; fla.tar.xz): the tests
# of the new prepare, the GDN forward of main / prep / prepexpf (three rounds alternated) between
# two runs of fla's forward, the kernels' times with the pipeline off and on, and Nsight Compute
# of the new prepare at 16K (pipeline off).
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/vt /tmp/fla && tar xJf carry2/extra.tar.xz -C /tmp/vt && V=/tmp/vt/vbins
tar -xJf carry2/fla.tar.xz -C /tmp/fla --strip-components=1
fla() { (unset LD_LIBRARY_PATH; FLA_DIR=/tmp/fla $T1 timeout 150 python3 scripts/device/anchors_gdn.py >> $R 2>&1); echo "fla exit $? at $(el) s" >> $R; }
BIN_DIR=$V plain_tests test_gated_delta_cuda
fla
P='gated deltanet \(chunked\) +prefill|hybrid \(gdn.*prefill'
mixers_ab "$P" main:$G prep:$V/golinear prepexpf:$V/golinear_prepexpf
for b in main:$G prep:$V/golinear prepexpf:$V/golinear_prepexpf; do
  out=/tmp/r/mixers_${b%%:*}_3.txt
  $T1 timeout 100 ${b#*:} bench --mixers --seq 8192,16384,32768 --contexts 4096 > $out 2>&1
  echo "${b%%:*} rep 3 exit $?: $(grep -E "$P" $out | awk '{for (i = 1; i < NF; ++i) if ($i == "ms") { print $(i + 2); break }}' | tr '\n' ' ')" >> $R
done
fla
for m in seg1 default; do
  opt=""; [ $m = seg1 ] && opt="--gdn-segments 1"
  KERNEL_TIMELINE_ALL=1 CUDA_INJECTION64_PATH=/tmp/lib/libkernel_timeline.so KERNEL_TIMELINE_OUT=/tmp/r/tl_$m.txt \
    $T1 timeout 100 $V/golinear bench --mixers --seq 16384,32768 --contexts 4096 --no-backward $opt > /tmp/r/m_$m.txt 2>&1
  echo "timeline prep $m exit $? at $(el) s" >> $R
  grep -E "gdn" /tmp/r/tl_$m.txt >> $R
done
BIN_DIR=$V plain_tests test_mixers_cuda test_train_cuda
NCU=/usr/local/cuda/bin/ncu
FULL="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats --section SourceCounters"
$T1 timeout 120 $NCU --clock-control none $FULL -k "regex:gdn_prepare_kernel" -c 1 -f -o /tmp/r/prep $V/golinear bench --mixers --seq 16384 --contexts 4096 --repeats 1 --warmups 0 --no-backward --gdn-segments 1 > /tmp/r/ncu_run.txt 2>&1
echo "ncu prep exit $? at $(el) s" >> $R
$NCU --import /tmp/r/prep.ncu-rep --page details --print-units base > /tmp/r/det_prep.txt 2>&1
$NCU --import /tmp/r/prep.ncu-rep --page source --csv --print-units base > /tmp/r/src_prep.csv 2>&1
grep -E "gdn_|Duration|Throughput|Issued Ipc|Eligible Warps|Achieved Occupancy|Registers" /tmp/r/det_prep.txt | head -20 >> $R
rm -f /tmp/r/*.ncu-rep
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
