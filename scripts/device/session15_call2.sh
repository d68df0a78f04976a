#!/bin/bash
# Session 15, call 2 (carry: pack.sh of main with the GEMV's 32 MiB L2 prefetch share and the
# decode kernel's early position load; extra.tar.xz: golinear_split = call 1's split kernel
# alone; libkernel_timeline.so with the names fixed + libcupti.so.13): the whole GPU suite
# (GpuTrainedStudent left out: the bundled model is not carried); batch-1 and batch-4 8B decode
# of both binaries alternated; each one's in-graph kernel times; Nsight Compute of the split
# decode kernel (stall reasons by SASS line).
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
tar xJf carry2/extra.tar.xz -C /tmp/bins/
TEST_ARGS='--gtest_filter=-*TrainedStudent*' plain_tests $(cd /tmp/bins && ls test_*_cuda)
decode_ab 1,4 split:/tmp/bins/golinear_split pf:$G
timeline split /tmp/bins/golinear_split
timeline pf $G
NCU=/usr/local/cuda/bin/ncu
FULL="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats --section SourceCounters"
$T1 timeout 120 $NCU --clock-control none --graph-profiling node $FULL -k "regex:hybrid_decode_kernel" -s 64 -c 1 -o /tmp/r/hdec \
  $G bench --config $CFG --batches 1 --contexts 4096 --variants hybrid --decode-repeats 3 > /dev/null 2> /tmp/r/ncu_err_hdec.txt
echo "ncu hdec exit $? at $(el) s" >> $R
$NCU --import /tmp/r/hdec.ncu-rep --page details --print-units base > /tmp/r/det_hdec.txt 2>&1
$NCU --import /tmp/r/hdec.ncu-rep --page source --csv --print-units base > /tmp/r/src_hdec.csv 2>&1
grep -E "^  [a-z_]+.*\(|^    Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Warp Cycles Per Issued" /tmp/r/det_hdec.txt | head -20 >> $R
rm -f /tmp/r/hdec.ncu-rep
tar cJf $OUT/r.tar.xz -C /tmp/r .
echo "total $(el) s" >> $R
