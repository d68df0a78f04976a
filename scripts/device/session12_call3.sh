#!/bin/bash
# Session 12, call 3: (A) call 2's plain run of GpuBatchGenerate.SoftmaxMatchesOneSequence under
# CUDA_LAUNCH_BLOCKING=1 did not end in 120 s (it takes 1.7 s without): the GPU's utilization
# while it hangs (a spinning kernel or a host-side wait) and its threads' backtraces
# (carry2/dbg.tar.xz: the unstripped test binary; cuda-gdb or gdb, whichever the machine has);
# (B) racecheck of test_eval_cuda's other four tests, unrestricted, beside it.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r && tar xJf carry2/dbg.tar.xz -C /tmp
CS=/usr/local/cuda/bin/compute-sanitizer
taskset -c 2-15 timeout -s INT -k 5 100 $CS --tool racecheck /tmp/bins/test_eval_cuda \
  --gtest_filter='-*TrainedStudent*:GpuBatchGenerate.SoftmaxMatchesOneSequence' > /tmp/r/rc_test_eval_cuda.txt 2>&1 &
RCP=$!
CUDA_LAUNCH_BLOCKING=1 taskset -c 0-1 /tmp/dbg/test_eval_cuda --gtest_filter=GpuBatchGenerate.SoftmaxMatchesOneSequence > /tmp/r/hang.txt 2>&1 &
P=$!
sleep 20
echo "hang: alive after 20 s: $(kill -0 $P 2>/dev/null && echo yes || echo no)" >> $R
nvidia-smi --query-compute-apps=pid,used_memory --format=csv >> $R 2>&1
for i in 1 2 3; do nvidia-smi --query-gpu=utilization.gpu,clocks.sm --format=csv,noheader >> $R 2>&1; sleep 1; done
for t in /proc/$P/task/*; do echo "$(cat $t/comm) $(cat $t/wchan 2>/dev/null) $(cat $t/stat | cut -d' ' -f3)"; done >> $R 2>&1
ls /usr/local/cuda/bin | grep -i gdb >> $R; command -v gdb >> $R
DBG=$(ls /usr/local/cuda/bin/cuda-gdb 2>/dev/null || command -v gdb)
[ -n "$DBG" ] && timeout 40 $DBG -p $P -batch -ex "info threads" -ex "thread apply all bt 30" > /tmp/r/bt.txt 2>&1
echo "debugger ($DBG) exit $? at $(el) s" >> $R
grep -E "^#|^Thread|^\*" /tmp/r/bt.txt | grep -vE "^#[0-9]+ +0x0000" | head -120 >> $R
kill -9 $P; wait $P 2>/dev/null
tail -5 /tmp/r/hang.txt >> $R
wait $RCP
echo "racecheck test_eval_cuda (4 tests): $(grep -c '^\[       OK' /tmp/r/rc_test_eval_cuda.txt) OK, $(grep -cE '^========= (Error|Warning|Internal)' /tmp/r/rc_test_eval_cuda.txt) reports, $(grep SUMMARY /tmp/r/rc_test_eval_cuda.txt), $(grep -E '^\[ (RUN|      OK)' /tmp/r/rc_test_eval_cuda.txt | tr '\n' ' ')" >> $R
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
