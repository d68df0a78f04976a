#!/bin/bash
# Session 18, call 4: why the GDN forward at 16K reads 0.65 ms in some processes and 0.77 ms in
# others (calls 2 and 3: the kernel-timeline runs, --seq 16384,32768, got 0.66-0.68; mixers_ab's,
# --seq 8192,16384,32768, mostly 0.77). main's CLI (vbins/golinear_head), `bench --mixers
# --no-backward` with each --seq list three times alternated, and 16K alone with 50 repeats; the
# GDN rows into $R, nvidia-smi's SM clock, power and throttle reasons every 100 ms beside.
cd "$(dirname "$0")/../.."  # (bins.tar.xz not carried)
source scripts/device/setup.sh
unpack_extra
B=$V/golinear_head
/usr/local/nvidia/bin/nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active \
  --format=csv -lms 100 > /tmp/r/smi.txt 2>&1 &
SMI=$!
for rep in 1 2 3; do
  for s in 16384 8192,16384 16384,32768 8192,16384,32768; do
    $T1 timeout 60 $B bench --mixers --no-backward --seq $s --contexts 4096 > /tmp/r/o_${s}_$rep.txt 2>&1
    echo "seq $s rep $rep exit $? at $(el) s: $(grep -E 'gated deltanet' /tmp/r/o_${s}_$rep.txt |
      awk '{print $(NF-0)}' | tr '\n' ' ')" >> $R
  done
done
$T1 timeout 60 $B bench --mixers --no-backward --seq 16384 --contexts 4096 --repeats 50 > /tmp/r/o_r50.txt 2>&1
echo "seq 16384 repeats 50 exit $? at $(el) s: $(grep -E 'gated deltanet' /tmp/r/o_r50.txt | awk '{print $NF}')" >> $R
kill $SMI
tar cJf $OUT/r.tar.xz -C /tmp r
echo "total $(el) s" >> $R
