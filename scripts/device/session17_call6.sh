#!/bin/bash
# Session 17, call 6 (carry: bins.tar.xz = main's binaries at bc124fd; extra.tar.xz as vbins/:
# golinear, test_gated_delta_cuda, test_mixers_cuda = this tree: the persistent forward's
# segment prepares launched as programmatic dependents of each other, so that each launch's
# blocks fill the SMs the previous one drains; fla.tar.xz): the GDN and mixer tests, fla's
# forward, the GDN forward of main and pdl (three rounds alternated), and the kernels' times of
# pdl (one run of fla only: the device budget was nearly spent).
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/vt /tmp/fla && tar xJf carry2/extra.tar.xz -C /tmp/vt && V=/tmp/vt/vbins
tar -xJf carry2/fla.tar.xz -C /tmp/fla --strip-components=1
fla() { (unset LD_LIBRARY_PATH; FLA_DIR=/tmp/fla $T1 timeout 150 python3 scripts/device/anchors_gdn.py >> $R 2>&1); echo "fla exit $? at $(el) s" >> $R; }
BIN_DIR=$V plain_tests test_gated_delta_cuda
fla
P='gated deltanet \(chunked\) +prefill|hybrid \(gdn.*prefill'
for rep in 1 2 3; do
  for b in main:$G pdl:$V/golinear; do
    out=/tmp/r/mixers_${b%%:*}_$rep.txt
    $T1 timeout 100 ${b#*:} bench --mixers --seq 8192,16384,32768 --contexts 4096 --no-backward > $out 2>&1
    echo "${b%%:*} rep $rep exit $?: $(grep -E "$P" $out | awk '{for (i = 1; i < NF; ++i) if ($i == "ms") { print $(i + 2); break }}' | tr '\n' ' ')" >> $R
  done
done
KERNEL_TIMELINE_ALL=1 CUDA_INJECTION64_PATH=/tmp/lib/libkernel_timeline.so KERNEL_TIMELINE_OUT=/tmp/r/tl_pdl.txt \
  $T1 timeout 100 $V/golinear bench --mixers --seq 16384,32768 --contexts 4096 --no-backward > /tmp/r/m_tl.txt 2>&1
echo "timeline pdl exit $? at $(el) s" >> $R; grep -E "gdn" /tmp/r/tl_pdl.txt >> $R
BIN_DIR=$V plain_tests test_mixers_cuda
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
