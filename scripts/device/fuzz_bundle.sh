#!/usr/bin/env bash
# Packs what scripts/device/fuzz_background.sh needs on another x86-64 Linux machine into one
# file (default carry2/fuzzbins.tar.xz, carried to the GPU machine):
#   fuzzbins/bin/fuzz_NAME     the libFuzzer harnesses of BUILD/fuzz (ten), without debug info
#                              (function symbols kept; replay a finding here for lines)
#   fuzzbins/lib/              their shared libraries other than glibc's (ldd here); with
#                              --lean LIBS_TAR, not those in LIBS_TAR (carry2/libs.tar.xz, unpacked
#                              to /tmp/lib by scripts/device/setup.sh) nor the Ubuntu image's
#   fuzzbins/root/, ROOT       the fixture files the harnesses open by the absolute source path
#                              compiled in (ROOT); fuzz_background.sh links ROOT there if absent
#   fuzzbins/seeds/NAME/       the committed corpus fuzz/corpus/NAME
#   fuzzbins/grown/NAME/       with --grown DIR: DIR/NAME (a grown working corpus, e.g.
#                              build-fuzz/corpus) minimized by -merge=1 against the seeds
#   fuzzbins/fuzz_background.sh, COMMIT
#
# usage: scripts/device/fuzz_bundle.sh [BUILD (default build-fuzz)] [--grown DIR] [--lean LIBS_TAR]
#                                       [--out FILE (default carry2/fuzzbins.tar.xz)]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build-fuzz grown="" out=carry2/fuzzbins.tar.xz lean=""
while [ $# -gt 0 ]; do
  case $1 in
    --grown) grown=${2:?--grown needs a folder}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    --lean) lean=${2:?--lean needs a libs tarball}; shift 2 ;;
    -*) echo "fuzz_bundle: unknown option $1" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
names=()
for f in fuzz/*_fuzz.cpp; do names+=("$(basename "$f" _fuzz.cpp)"); done
for n in "${names[@]}"; do
  [ -x "$build/fuzz/fuzz_$n" ] || { echo "fuzz_bundle: no $build/fuzz/fuzz_$n (scripts/fuzz.sh builds it)" >&2; exit 2; }
done
root=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
[ -n "$root" ] || { echo "fuzz_bundle: no source directory in $build/CMakeCache.txt" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
B=$tmp/fuzzbins
mkdir -p "$B/bin" "$B/lib" "$B/root" "$B/seeds"
for n in "${names[@]}"; do
  objcopy --strip-debug "$build/fuzz/fuzz_$n" "$B/bin/fuzz_$n"
  mkdir -p "$B/seeds/$n" && cp fuzz/corpus/"$n"/* "$B/seeds/$n/"
  ldd "$build/fuzz/fuzz_$n" | awk '/=> \// { print $3 }' >> "$tmp/libs"
done
sort -u "$tmp/libs" | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' > "$tmp/libs.keep"
if [ -n "$lean" ]; then
  # Leave out what the call unpacks from LIBS_TAR into /tmp/lib (scripts/device/setup.sh) and
  # what every Ubuntu 24.04 image with Python holds (the GPU machine's).
  tar -tJf "$lean" | xargs -r -n1 basename > "$tmp/lean"
  printf '%s\n' libstdc++.so.6 libgcc_s.so.1 libz.so.1 libssl.so.3 libcrypto.so.3 >> "$tmp/lean"
  awk 'NR == FNR { skip[$0] = 1; next } { n = $0; sub(/.*\//, "", n); if (!(n in skip)) print }' \
    "$tmp/lean" "$tmp/libs.keep" > "$tmp/libs.lean"
  mv "$tmp/libs.lean" "$tmp/libs.keep"
fi
xargs -r cp -L -t "$B/lib/" < "$tmp/libs.keep"
# What the harnesses open under the source tree (fuzz/*_fuzz.cpp: GOLINEAR_TEST_DATA,
# GOLINEAR_MODEL_DIR): the json files of those folders (served_model_make reads the model
# folder's tokenizer_config.json too), and random-llama's weights (2 MB: linearization_weights
# loads that model), never the bundled model's.
for dir in tests/data/fixtures/random-llama models/tiny-llama3-25m; do
  mkdir -p "$B/root/$dir" && cp "$root/$dir"/*.json "$B/root/$dir/"
done
cp "$root/tests/data/fixtures/random-llama/model.safetensors" "$B/root/tests/data/fixtures/random-llama/"
echo "$root" > "$B/ROOT"
git -C "$root" rev-parse HEAD > "$B/COMMIT"
cp scripts/device/fuzz_background.sh "$B/"
if [ -n "$grown" ]; then
  export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1
  for n in "${names[@]}"; do
    [ -d "$grown/$n" ] || continue
    mkdir -p "$B/grown/$n" "$tmp/m/$n"
    cp "$B/seeds/$n"/* "$tmp/m/$n/"
    ls "$tmp/m/$n" | sort > "$tmp/before"
    nice -n 19 timeout 900 "$build/fuzz/fuzz_$n" -merge=1 -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
      "$tmp/m/$n" "$grown/$n" > "$tmp/merge_$n.log" 2>&1 || { echo "fuzz_bundle: merge $n failed" >&2; continue; }
    ls "$tmp/m/$n" | sort | comm -13 "$tmp/before" - | while read -r f; do cp "$tmp/m/$n/$f" "$B/grown/$n/"; done
    echo "grown/$n: $(ls "$B/grown/$n" | wc -l) units from $(ls "$grown/$n" | wc -l)"
  done
fi
mkdir -p "$(dirname "$out")"
tar -C "$tmp" -cf - fuzzbins | xz -9 > "$out.tmp" && mv "$out.tmp" "$out"
echo "$out: $(stat -c %s "$out") bytes; $(ls "$B/lib" | tr '\n' ' ')"
