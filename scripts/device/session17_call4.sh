#!/bin/bash
# Session 17, call 4 (carry: bins.tar.xz = main's binaries at bc124fd; extra.tar.xz as vbins/:
# golinear and test_gated_delta_cuda = this tree (the persistent state pass also at value block
# 128: one block of eight warps per head, 32 SMs instead of 64, so the segments' prepares get
# 100 SMs); fla.tar.xz): the GDN tests, the GDN forward of main (value block 64) and of this
# tree at 64 and 128 (three rounds alternated) between two runs of fla's forward, and the kernels'
# times at 128 with the pipeline off (the chain alone) and on.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/vt /tmp/fla && tar xJf carry2/extra.tar.xz -C /tmp/vt && V=/tmp/vt/vbins
tar -xJf carry2/fla.tar.xz -C /tmp/fla --strip-components=1
fla() { (unset LD_LIBRARY_PATH; FLA_DIR=/tmp/fla $T1 timeout 150 python3 scripts/device/anchors_gdn.py >> $R 2>&1); echo "fla exit $? at $(el) s" >> $R; }
BIN_DIR=$V plain_tests test_gated_delta_cuda
fla
P='gated deltanet \(chunked\) +prefill'
for rep in 1 2 3; do
  for b in "main:$G:64" "vb64:$V/golinear:64" "vb128:$V/golinear:128"; do
    n=${b%%:*}; rest=${b#*:}; bin=${rest%:*}; vb=${rest##*:}
    out=/tmp/r/mixers_${n}_$rep.txt
    $T1 timeout 100 $bin bench --mixers --seq 8192,16384,32768 --contexts 4096 --no-backward --value-block $vb > $out 2>&1
    echo "$n rep $rep exit $?: $(grep -E "$P" $out | awk '{for (i = 1; i < NF; ++i) if ($i == "ms") { print $(i + 2); break }}' | tr '\n' ' ')" >> $R
  done
done
fla
for m in seg1 default; do
  opt=""; [ $m = seg1 ] && opt="--gdn-segments 1"
  KERNEL_TIMELINE_ALL=1 CUDA_INJECTION64_PATH=/tmp/lib/libkernel_timeline.so KERNEL_TIMELINE_OUT=/tmp/r/tl_$m.txt \
    $T1 timeout 100 $V/golinear bench --mixers --seq 16384,32768 --contexts 4096 --no-backward --value-block 128 $opt > /tmp/r/m_$m.txt 2>&1
  echo "timeline vb128 $m exit $? at $(el) s" >> $R
  grep -E "gdn" /tmp/r/tl_$m.txt >> $R
done
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
