#!/bin/bash
# Session 17, call 1 (carry: bins.tar.xz = main's binaries at bc124fd; extra.tar.xz as vbins/:
# golinear = this tree (the split GDN forward: the persistent state pass writes each chunk's Sᵀ
# and ũ, gdn_output_kernel computes the outputs in parallel, chunk groups of 8 signalled),
# golinear_split4 / _split16 = the same built -DGL_GDN_SPLIT=4 / 16, and this tree's
# test_gated_delta_cuda, test_mixers_cuda; fla.tar.xz = ../shared/anchors' snapshot):
# the GDN tests of the split, the GDN forward of main and the splits (three rounds alternated)
# between two runs of fla's forward, the split's kernel times, the mixer tests of the split, then
# Nsight Compute of the attention dk/dv kernel at 8K and 16K (main).
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/vt /tmp/fla && tar xJf carry2/extra.tar.xz -C /tmp/vt && V=/tmp/vt/vbins
tar -xJf carry2/fla.tar.xz -C /tmp/fla --strip-components=1
fla() { (unset LD_LIBRARY_PATH; FLA_DIR=/tmp/fla $T1 timeout 150 python3 scripts/device/anchors_gdn.py >> $R 2>&1); echo "fla exit $? at $(el) s" >> $R; }
BIN_DIR=$V plain_tests test_gated_delta_cuda
fla
P='gated deltanet \(chunked\) +prefill|hybrid \(gdn.*prefill'
mixers_ab "$P" main:$G split8:$V/golinear split4:$V/golinear_split4 split16:$V/golinear_split16
for b in main:$G split8:$V/golinear; do
  out=/tmp/r/mixers_${b%%:*}_3.txt
  $T1 timeout 100 ${b#*:} bench --mixers --seq 8192,16384,32768 --contexts 4096 > $out 2>&1
  echo "${b%%:*} rep 3 exit $?: $(grep -E "$P" $out | awk '{for (i = 1; i < NF; ++i) if ($i == "ms") { print $(i + 2); break }}' | tr '\n' ' ')" >> $R
done
fla
mixers_timeline split8 $V/golinear
BIN_DIR=$V plain_tests test_mixers_cuda
NCU=/usr/local/cuda/bin/ncu
FULL="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats"
for T in 8192 16384; do
  $T1 timeout 90 $NCU --clock-control none $FULL -k "regex:flash_backward_dkdv_wgmma" -c 1 -f -o /tmp/r/dkdv_$T $G bench --mixers --seq $T --contexts 4096 --repeats 1 --warmups 0 > /tmp/r/ncu_run_$T.txt 2>&1
  echo "ncu dkdv $T exit $? at $(el) s" >> $R
  $NCU --import /tmp/r/dkdv_$T.ncu-rep --page details --print-units base > /tmp/r/det_dkdv_$T.txt 2>&1
  grep -E "Duration|Throughput|Hit Rate|Issued|Eligible|Stall|Occupancy|Bandwidth|Busy" /tmp/r/det_dkdv_$T.txt | head -40 | sed "s/^/  $T /" >> $R
done
rm -f /tmp/r/*.ncu-rep
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
