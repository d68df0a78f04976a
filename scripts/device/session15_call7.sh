#!/bin/bash
# Session 15, call 7 (carry: call 6's pack of the final main; extra.tar.xz: golinear_old = session
# 14's 56f0cba): the 8B attention transfer of both, two rounds alternated — the teacher's and the
# students' forwards launch the norm, the qkv split and SwiGLU as programmatic dependents now.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/r
tar xJf carry2/extra.tar.xz -C /tmp/bins/
transfer_ab old:/tmp/bins/golinear_old new:$G
echo "total $(el) s" >> $R
