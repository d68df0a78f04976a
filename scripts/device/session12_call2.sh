#!/bin/bash
# Session 12, call 2: (A) why racecheck restricted to golinear's kernels (--kernel-name
# kns=golinear, call 1) ended the model, eval, mixer and trainer tests with "The Sanitizer failed to
# handle a hardware exception" and an illegal address, where the unrestricted racecheck of session 11
# ran those tests: the first eval test under the restricted racecheck with CUDA_LAUNCH_BLOCKING=1
# (the failing launch named), under the restricted memcheck, plainly with CUDA_LAUNCH_BLOCKING=1,
# and restricted with the GEMV left out; (B) racecheck of the five binaries resumed where call 1
# left them (its passed tests filtered out): test_gated_delta_cuda restricted as in call 1 (no
# cuBLAS there; it ran clean so), the others unrestricted (but for the 30-step transfer test, 210 s
# restricted in call 1: too long for a call unrestricted); five at a time until the call's end.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r
CS=/usr/local/cuda/bin/compute-sanitizer
cs_one() {  # binary filter [sanitizer options]: racecheck cut (SIGINT) 25 s before the call's end
  local b=$1 f=$2; shift 2
  timeout -s INT -k 10 $(( 565 - $(( $(date +%s) - T0 )) )) $CS --tool racecheck "$@" /tmp/bins/$b --gtest_filter="$f" > /tmp/r/rc_$b.txt 2>&1; local rc=$?
  echo "racecheck $b $*: exit $rc at $(( $(date +%s) - T0 )) s, $(grep -c '^\[       OK' /tmp/r/rc_$b.txt) tests OK, $(grep -cE '^========= (Error|Warning|Internal)' /tmp/r/rc_$b.txt) reports, $(grep -E 'SUMMARY' /tmp/r/rc_$b.txt | tail -1), $(grep -E '^\[  (PASSED|FAILED)' /tmp/r/rc_$b.txt | tr '\n' ' ')" >> /tmp/r/rc_summary.txt
  grep -E '^\[       OK' /tmp/r/rc_$b.txt | awk '{print $4}' > /tmp/r/rc_$b.ok
}
export -f cs_one; export CS T0
( taskset -c 2-15 bash -c 'cs_one test_eval_cuda "-*TrainedStudent*"' &
  taskset -c 2-15 bash -c 'cs_one test_mixers_cuda "-*TrainedStudent*:GpuHybridMixer.SplitIsTheExactBranchUntilATokenLeavesTheExactSet:GpuHybridMixer.DownloadReturnsWhatUploadGave:GpuHybridMixer.LayoutHasTheCpuNamesWithTheGateMatricesFirst:GpuHybridMixer.RefusesTheCpuOnlyStatesAndHeadDimsWithOneLine"' &
  taskset -c 2-15 bash -c 'cs_one test_gated_delta_cuda "-*TrainedStudent*:CudaGatedDeltaBackward.D64GroupsOf2:CudaGatedDeltaBackward.D128SingleHead:CudaGatedDeltaBackward.ShorterThanOneChunkGqa4:CudaGatedDeltaBackward.ExactChunkD64:CudaGatedDeltaBackward.StronglyNegativeGateGqa4D128:CudaGatedDeltaBackward.GateNearZeroLongD64:CudaGatedDeltaBackward.GateNearZeroD128Gqa4:CudaGatedDeltaBackward.AllValueBlocks:CudaGatedDeltaBackward.Fp32Checkpoints:CudaGatedDeltaBackward.ForwardSlice64:CudaGatedDeltaForward.ValueBlock64D128Gqa4OneSegment:CudaGatedDeltaForward.ValueBlock64D128Pipelined:CudaGatedDeltaForward.ValueBlock64D64:CudaGatedDeltaForward.DefaultPipelinedManySegments:CudaGatedDeltaForward.PipelineStreamsPerThreadReleased" --kernel-name kns=golinear' &
  taskset -c 2-15 bash -c 'cs_one test_model_cuda "-*TrainedStudent*:GpuModelLoadErrors.RefusalsAreOneLine"' &
  taskset -c 2-15 bash -c 'cs_one test_train_cuda "-*TrainedStudent*:GpuAttentionTransfer.FirstStepLossMatchesTheCpuAndTheLossFalls:GpuOptimizer.AdamWAndClippingMatchTheCpuOptimizer:GpuOptimizer.ANonFiniteGradientChangesNothing:GpuAttentionTransfer.RefusesTheCpuOnlyStates:GpuDistillation.RefusesATeacherThatIsNotSoftmax"' &
  wait ) &
RCP=$!
E=GpuBatchGenerate.SoftmaxMatchesOneSequence
T1="taskset -c 0-1"
CUDA_LAUNCH_BLOCKING=1 $T1 timeout 120 $CS --tool racecheck --kernel-name kns=golinear /tmp/bins/test_eval_cuda --gtest_filter=$E > /tmp/r/diag_rc_filtered_blocking.txt 2>&1; echo "diag racecheck kns=golinear blocking: exit $? at $(el) s" >> $R
$T1 timeout 120 $CS --tool memcheck --kernel-name kns=golinear /tmp/bins/test_eval_cuda --gtest_filter=$E > /tmp/r/diag_mc_filtered.txt 2>&1; echo "diag memcheck kns=golinear: exit $? at $(el) s" >> $R
CUDA_LAUNCH_BLOCKING=1 $T1 timeout 120 /tmp/bins/test_eval_cuda --gtest_filter=$E > /tmp/r/diag_plain_blocking.txt 2>&1; echo "diag plain blocking: exit $? at $(el) s" >> $R
$T1 timeout 120 $CS --tool racecheck --kernel-name kns=golinear --kernel-name-exclude kns=gemv /tmp/bins/test_eval_cuda --gtest_filter=$E > /tmp/r/diag_rc_nogemv.txt 2>&1; echo "diag racecheck kns=golinear, gemv excluded: exit $? at $(el) s" >> $R
for f in /tmp/r/diag_*.txt; do echo "== $f"; grep -E "^=========|CUDA error|FAILED|PASSED|error" $f | head -12; done >> $R
wait $RCP
cat /tmp/r/rc_summary.txt >> $R
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
