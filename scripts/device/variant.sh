#!/bin/bash
# variant.sh NAME "FLAGS" [TARGET...]: a variant build of one CUDA file for an A/B on the GPU
# machine, without a second build tree. Compiles src/kernels/cuda/$SRC.cu (default gated_delta)
# with build/'s own nvcc command plus FLAGS (e.g. -DGL_GDN_PREP4=1), puts the object into a copy
# of build/libgolinear_cuda.a and relinks each TARGET (default: golinear test_gated_delta_cuda
# test_mixers_cuda test_train_cuda) with build/'s link command against that copy, as
# /tmp/v/NAME/TARGET_NAME (golinear: golinear_NAME). Run from the repository root after
# `cmake --build build`; pack the results into carry2/extra.tar.xz as vbins/ (setup.sh's
# unpack_extra).
set -euo pipefail
cd "$(dirname "$0")/../.."
NAME=$1 FLAGS=$2; shift 2
SRC=${SRC:-gated_delta}
TARGETS=${*:-golinear test_gated_delta_cuda test_mixers_cuda test_train_cuda}
OUTD=/tmp/v/$NAME
mkdir -p $OUTD
cd build
obj=CMakeFiles/golinear_cuda.dir/src/kernels/cuda/$SRC.cu.o
cmd=$(ninja -t commands golinear_cuda | grep -F -- "-c /work/main/src/kernels/cuda/$SRC.cu" | head -1)
[ -n "$cmd" ] || { echo "variant.sh: no compile command for $SRC.cu" >&2; exit 1; }
cmd=${cmd/ -o $obj/ -o $OUTD/$SRC.cu.o}
cmd=${cmd/ -MD -MT $obj -MF $obj.d/}
eval "$cmd $FLAGS"
cp libgolinear_cuda.a $OUTD/libgolinear_cuda.a
(cd $OUTD && ar r libgolinear_cuda.a $SRC.cu.o)  # replaces the member of that name
for t in $TARGETS; do
  link=$(ninja -t commands $t | tail -1)
  link=${link%% && cd *}  # the link alone, not the test discovery after it
  out=$(echo "$link" | grep -oE -- "-o [^ ]+" | head -1 | cut -c4-)
  base=$(basename $out)
  [ $base = golinear ] && new=$OUTD/golinear_$NAME || new=$OUTD/${base}_$NAME
  link=${link//libgolinear_cuda.a/$OUTD/libgolinear_cuda.a}
  link=${link/-o $out /-o $new }
  (eval "$link")
  echo "variant.sh: $new"
done
