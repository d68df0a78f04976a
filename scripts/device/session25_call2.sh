#!/bin/bash
# Session 25, call 2 (carry: call 1's; extra.tar.xz as vbins/: golinear_nomixer (no hybrid decode
# kernels: session24_skip_kernels.patch's -DGL_EXP_SKIP_MIXER) and golinear_ew (the decode kernel
# returning right after its wait)): is the batch-1 8B hybrid step held by the power cap? nvidia-smi
# samples (every 20 ms: SM clock, power, the clock event reasons) beside 600 decode steps of main,
# nomixer and ew, alternated; each run's samples above 250 W summarised.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
unpack_extra
for rep in 1 2; do
  power_probe main_$rep $G
  power_probe nomixer_$rep $V/golinear_nomixer
  power_probe ew_$rep $V/golinear_ew
done
head -2 /tmp/r/smi_main_1.txt >> $R
/usr/local/nvidia/bin/nvidia-smi -q -d POWER | grep -iE "limit|draw" | head -8 >> $R
echo "total $(el) s" >> $R
