#!/bin/bash
# Written in session 17, not yet run: the A/B of the two GDN patches of scripts/device/experiments/
# — gdn_swizzle.patch (the prepare, state-pass and reverse-pass tiles in a dense XOR-swizzled
# shared layout; branch gdn-swizzle) and gdn_merges_tf32.patch (the prepare's inverse merges on
# mma.sync m16n8k8 in 3×tf32; branch gdn-merges-tf32); gdn_merges_tf32_on_swizzle.patch is the
# second on top of the first (branch gdn-both). Carry: bins.tar.xz = main's binaries;
# extra.tar.xz as vbins/: golinear_swz, golinear_mrg, golinear_both (each build's CLI) and the
# both build's test_gated_delta_cuda, test_train_cuda, test_mixers_cuda; fla.tar.xz =
# ../shared/anchors' snapshot. Runs the both build's GDN, trainer and mixer tests, fla's forward,
# the GDN forward and fwd + bwd of main, swz, mrg and both (three rounds alternated), and Nsight
# Compute of both's prepare and state pass at 16K with the pipeline off (shared-memory wavefronts
# against session 17's 51.6 M and 56.2 M). About 5 minutes.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/vt /tmp/fla && tar xJf carry2/extra.tar.xz -C /tmp/vt && V=/tmp/vt/vbins
tar -xJf carry2/fla.tar.xz -C /tmp/fla --strip-components=1
BIN_DIR=$V plain_tests test_gated_delta_cuda
(unset LD_LIBRARY_PATH; FLA_DIR=/tmp/fla $T1 timeout 150 python3 scripts/device/anchors_gdn.py >> $R 2>&1); echo "fla exit $? at $(el) s" >> $R
P='gated deltanet \(chunked\)|hybrid \(gdn.*prefill'
for rep in 1 2 3; do
  for b in main:$G swz:$V/golinear_swz mrg:$V/golinear_mrg both:$V/golinear_both; do
    out=/tmp/r/mixers_${b%%:*}_$rep.txt
    $T1 timeout 100 ${b#*:} bench --mixers --seq 8192,16384,32768 --contexts 4096 > $out 2>&1
    echo "${b%%:*} rep $rep exit $?: $(grep -E "$P" $out | awk '{for (i = 1; i < NF; ++i) if ($i == "ms") { print $(i + 2); break }}' | tr '\n' ' ')" >> $R
  done
done
NCU=/usr/local/cuda/bin/ncu
FULL="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section InstructionStats --section SourceCounters"
$T1 timeout 120 $NCU --clock-control none $FULL -k "regex:gdn_prepare_kernel|gdn_state_pass_kernel" -c 2 -f -o /tmp/r/both $V/golinear_both bench --mixers --seq 16384 --contexts 4096 --repeats 1 --warmups 0 --no-backward --gdn-segments 1 > /tmp/r/ncu_run.txt 2>&1
echo "ncu both exit $? at $(el) s" >> $R
$NCU --import /tmp/r/both.ncu-rep --page details --print-units base > /tmp/r/det_both.txt 2>&1
$NCU --import /tmp/r/both.ncu-rep --page source --csv --print-units base > /tmp/r/src_both.csv 2>&1
grep -E "gdn_|Duration|L1/TEX Cache Throughput|Issued Ipc|wavefronts" /tmp/r/det_both.txt | cut -c1-160 | head -20 >> $R
rm -f /tmp/r/*.ncu-rep
BIN_DIR=$V plain_tests test_train_cuda test_mixers_cuda
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
