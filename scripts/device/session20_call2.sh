#!/bin/bash
# Session 20, call 2 (carry: carry2/ from pack.sh of this tree as bins/ — the GDN forward's
# `--gdn-wait-groups` and `--gdn-lead` options; fla.tar.xz; libkernel_timeline.so and
# libcupti.so.13): the GDN tests (the wait-group and lead tests), then the GDN forward of main,
# with 64 wait groups, with 4 segments and 64 wait groups, and with a lead of 15, 20, 25, 30 or
# 40% (two prepare launches, 64 wait groups), and the persistent pass at 8K with a lead of 25%,
# six rounds alternated; fla's forward in the same call, then fla's forward under the kernel
# timeline (its kernels' times) and the timeline of the lead-25 forward.
# (A record: --gdn-lead was removed before 85ecf3e, measured no better; BENCHMARKS.md session 20.)
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra fla
plain_tests test_gated_delta_cuda
P='gated deltanet \(chunked\)|hybrid \(gdn.*prefill'
MIXERS_ARGS=--no-backward ROUNDS=6 mixers_ab "$P" main:$G "wg64:$G:--gdn-wait-groups 64" \
  "s4wg64:$G:--gdn-segments 4 --gdn-wait-groups 64" \
  "l15:$G:--gdn-lead 15" "l20:$G:--gdn-lead 20" "l25:$G:--gdn-lead 25" "l30:$G:--gdn-lead 30" \
  "l40:$G:--gdn-lead 40" "al25:$G:--gdn-persistent always --gdn-lead 25"
fla_anchor
mkdir -p /tmp/cupti && cp /tmp/lib/libcupti.so.13 /tmp/cupti/
(unset LD_LIBRARY_PATH; LD_LIBRARY_PATH=/tmp/cupti KERNEL_TIMELINE_ALL=1 \
  CUDA_INJECTION64_PATH=/tmp/lib/libkernel_timeline.so KERNEL_TIMELINE_OUT=/tmp/r/tl_fla.txt \
  FLA_DIR=/tmp/fla $T1 timeout 150 python3 scripts/device/anchors_gdn.py > /tmp/r/fla_tl_run.txt 2>&1)
echo "fla timeline exit $? at $(el) s" >> $R
head -40 /tmp/r/tl_fla.txt >> $R
GDN_MODES=default gdn_timelines l25 $G --gdn-lead 25
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
