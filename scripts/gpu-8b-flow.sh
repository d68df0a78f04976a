#!/bin/bash
# An 8B-shaped random checkpoint through the CLI on one GPU (docs/RANDOM_CHECKPOINTS.md), run on
# the GPU machine by the device tool from the repository root:
#   bash scripts/gpu-8b-flow.sh llama|qwen3 CARRY_DIR [STEP...]
# STEPs (default all, in this order): checkpoint linearize ppl generate score. The checkpoints go
# under out/gpu8b/ (ignored by git, so they stay on a warm machine between device calls: the
# steps can be split over calls of at most 10 minutes each).
# CARRY_DIR holds golinear.xz (the full CUDA build of this machine), libs.tar.xz (its shared
# libraries, docs/NOTES.md) and {llama3,qwen3}-tokenizer.json.xz (build/npm/*/tokenizer.json).
# Logs go to $OUT/<model>-flow.log, command outputs to $OUT/<model>-<step>.out.
set -u
model=${1:?usage: gpu-8b-flow.sh llama|qwen3 CARRY_DIR [STEP...]}
carry=${2:?usage: gpu-8b-flow.sh llama|qwen3 CARRY_DIR [STEP...]}
shift 2
steps=${*:-checkpoint linearize ppl generate score}
out=${OUT:-$PWD/out/gpu8b/logs}
work=$PWD/out/gpu8b
mkdir -p "$out" "$work/lib"
case "$model" in
  llama) config=bench/configs/llama-3.1-8b.json; tokenizer=llama3 ;;
  qwen3) config=bench/configs/qwen3-8b.json; tokenizer=qwen3 ;;
  *) echo "unknown model '$model' (llama or qwen3)" >&2; exit 2 ;;
esac
g=$work/golinear
if [ ! -x "$g" ]; then  # no xz on that machine: python3's lzma unpacks
  python3 - "$carry" "$work" <<'EOF' || exit 1
import lzma, os, shutil, sys, tarfile
carry, work = sys.argv[1], sys.argv[2]
tarfile.open(os.path.join(carry, "libs.tar.xz")).extractall(os.path.join(work, "lib"))
for src, dst in [("golinear.xz", "golinear"), ("llama3-tokenizer.json.xz", "llama3/tokenizer.json"),
                 ("qwen3-tokenizer.json.xz", "qwen3/tokenizer.json")]:
    if not os.path.exists(os.path.join(carry, src)):
        continue
    os.makedirs(os.path.dirname(os.path.join(work, dst)), exist_ok=True)
    with lzma.open(os.path.join(carry, src)) as f, open(os.path.join(work, dst), "wb") as h:
        shutil.copyfileobj(f, h)
os.chmod(os.path.join(work, "golinear"), 0o755)
EOF
fi
# libs.tar.xz may hold its libraries at the top or under lib/.
export LD_LIBRARY_PATH=$work/lib:$work/lib/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
base=$work/$model-8b-random
lin=$work/$model-8b-linearized
log=$out/$model-flow.log
run() {  # run NAME SECONDS COMMAND...: the command's stdout to $OUT/<model>-NAME.out, stderr to the log
  local name=$1 limit=$2; shift 2
  echo "== $name: $*" >>"$log"
  local t0=$(date +%s)
  timeout "$limit" "$@" >>"$out/$model-$name.out" 2>>"$log"
  local rc=$?
  echo "== $name: exit $rc after $(( $(date +%s) - t0 )) s" >>"$log"
  return $rc
}
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv >>"$log" 2>&1
for step in $steps; do
  case "$step" in
    checkpoint)
      [ -d "$base" ] || run checkpoint 300 "$g" random-checkpoint --config "$config" \
          --tokenizer "$work/$tokenizer/tokenizer.json" --out "$base" || exit 1
      du -sh "$base" >>"$log"; df -h "$work" >>"$log" ;;
    linearize)
      run linearize 540 "$g" linearize "$base" --data data/corpus_train_sample.jsonl.xz --out "$lin" \
          --device cuda --stage both --seq-len 4096 --tokens 409600 --e2e-tokens 40960 || exit 1 ;;
    ppl)
      run ppl 150 "$g" eval ppl "$lin" --input data/corpus_val.jsonl --seq-len 4096 --limit 8 --device cuda --json
      run ppl-base 150 "$g" eval ppl "$base" --input data/corpus_val.jsonl --seq-len 4096 --limit 8 --device cuda --json ;;
    generate)
      run generate 120 "$g" generate "$lin" --prompt "The history of the city begins" \
          --max-new-tokens 32 --device cuda ;;
    score)
      printf '{"text": "The quick brown fox jumps over the lazy dog."}\n{"text": "Linear attention keeps a constant-size state."}\n' >"$work/score.jsonl"
      run score 120 "$g" score "$lin" --input "$work/score.jsonl" --device cuda
      run score-decode 120 "$g" score "$lin" --input "$work/score.jsonl" --mode decode --device cuda ;;
    *) echo "unknown step '$step'" >&2; exit 2 ;;
  esac
done
grep -h "memory:\|loaded\|exit\|took" "$log" >"$out/$model-summary.txt"
