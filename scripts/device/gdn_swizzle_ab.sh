#!/bin/bash
# Written in session 17, not yet run: the A/B of scripts/device/experiments/gdn_swizzle.patch
# (the GDN prepare, state-pass and reverse-pass tiles in a dense XOR-swizzled shared layout; branch
# gdn-swizzle). Carry: bins.tar.xz = main's binaries; extra.tar.xz as vbins/: golinear,
# test_gated_delta_cuda, test_mixers_cuda, test_train_cuda built from the patched tree;
# fla.tar.xz = ../shared/anchors' snapshot. Runs the patched tree's GDN, mixer and trainer tests,
# fla's forward, the GDN forward and fwd+bwd of main and swz (three rounds alternated), and
# Nsight Compute of the patched prepare and state pass at 16K with the pipeline off (the shared
# wavefronts of their cp.async loads: session 17 counted 2.6× the ideal with the padded rows).
# About 4 minutes.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/vt /tmp/fla && tar xJf carry2/extra.tar.xz -C /tmp/vt && V=/tmp/vt/vbins
tar -xJf carry2/fla.tar.xz -C /tmp/fla --strip-components=1
BIN_DIR=$V plain_tests test_gated_delta_cuda
(unset LD_LIBRARY_PATH; FLA_DIR=/tmp/fla $T1 timeout 150 python3 scripts/device/anchors_gdn.py >> $R 2>&1); echo "fla exit $? at $(el) s" >> $R
P='gated deltanet \(chunked\)|hybrid \(gdn.*prefill'
for rep in 1 2 3; do
  for b in main:$G swz:$V/golinear; do
    out=/tmp/r/mixers_${b%%:*}_$rep.txt
    $T1 timeout 100 ${b#*:} bench --mixers --seq 8192,16384,32768 --contexts 4096 > $out 2>&1
    echo "${b%%:*} rep $rep exit $?: $(grep -E "$P" $out | awk '{for (i = 1; i < NF; ++i) if ($i == "ms") { print $(i + 2); break }}' | tr '\n' ' ')" >> $R
  done
done
NCU=/usr/local/cuda/bin/ncu
FULL="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section InstructionStats --section SourceCounters"
$T1 timeout 120 $NCU --clock-control none $FULL -k "regex:gdn_prepare_kernel|gdn_state_pass_kernel" -c 2 -f -o /tmp/r/swz $V/golinear bench --mixers --seq 16384 --contexts 4096 --repeats 1 --warmups 0 --no-backward --gdn-segments 1 > /tmp/r/ncu_run.txt 2>&1
echo "ncu swz exit $? at $(el) s" >> $R
$NCU --import /tmp/r/swz.ncu-rep --page details --print-units base > /tmp/r/det_swz.txt 2>&1
$NCU --import /tmp/r/swz.ncu-rep --page source --csv --print-units base > /tmp/r/src_swz.csv 2>&1
grep -E "gdn_|Duration|L1/TEX Cache Throughput|Issued Ipc|wavefronts" /tmp/r/det_swz.txt | cut -c1-160 | head -20 >> $R
rm -f /tmp/r/*.ncu-rep
BIN_DIR=$V plain_tests test_mixers_cuda test_train_cuda
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
