#!/bin/bash
# variant.sh NAME "FLAGS" [TARGET...]: a variant build of one source file for an A/B on the GPU
# machine, without a second build tree. Compiles src/kernels/cuda/$SRC.cu (default gated_delta;
# SRC with a slash: src/$SRC, e.g. model/cuda/gpu_model.cpp) with build/'s own compile command
# plus FLAGS (e.g. -DGL_GDN_PREP4=1), puts the object into a copy of the static library that
# holds it and relinks each TARGET (default: golinear test_gated_delta_cuda
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
case $SRC in */*) path=src/$SRC ;; *) path=src/kernels/cuda/$SRC.cu ;; esac
cmd=$(ninja -t commands golinear | grep -F -- "-c /work/main/$path" | head -1)
[ -n "$cmd" ] || { echo "variant.sh: no compile command for $path" >&2; exit 1; }
obj=$(echo "$cmd" | grep -oE -- "-o [^ ]+" | head -1 | cut -c4-)
lib=lib$(echo "$obj" | sed -E 's|CMakeFiles/([^/]+)\.dir/.*|\1|').a
member=$(basename $obj)
cmd=${cmd/ -o $obj/ -o $OUTD/$member}
cmd=${cmd/ -MD -MT $obj -MF $obj.d/}
eval "$cmd $FLAGS"
cp $lib $OUTD/$lib
(cd $OUTD && ar r $lib $member)  # replaces the member of that name
for t in $TARGETS; do
  link=$(ninja -t commands $t | tail -1)
  link=${link%% && cd *}  # the link alone, not the test discovery after it
  out=$(echo "$link" | grep -oE -- "-o [^ ]+" | head -1 | cut -c4-)
  base=$(basename $out)
  [ $base = golinear ] && new=$OUTD/golinear_$NAME || new=$OUTD/${base}_$NAME
  link=${link//$lib/$OUTD/$lib}
  link=${link/-o $out /-o $new }
  (eval "$link")
  echo "variant.sh: $new"
done
