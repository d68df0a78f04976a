#!/usr/bin/env bash
# The paper's cache-budget ablation as commands (issue 14): the recipe at total exact budgets of
# 64, 128, 256, 512 and 1024 keys per layer (8 sinks + window), each trained at one token budget
# and evaluated on a validation file in windows of 2048; one JSON line per budget on stdout
# ({"budget", "linearize": <linearize's summary>, "eval": <eval ppl --json>}), the teacher first.
#
#   scripts/cache_budget.sh MODEL TRAIN.jsonl[.xz] VAL.jsonl OUT_DIR [linearize options...]
#
# e.g. scripts/cache_budget.sh models/tiny-llama3-25m data/corpus_train_sample.jsonl.xz \
#        data/corpus_val.jsonl runs/budget --device cuda --tokens 2097152 --e2e-tokens 1048576
# (BUDGETS="64 128" to run fewer; the device is taken from the options, cpu by default).
set -euo pipefail
cd "$(dirname "$0")/.."
golinear=${GOLINEAR:-build/golinear}
[ $# -ge 4 ] || { echo "usage: $0 MODEL TRAIN VAL OUT_DIR [linearize options...]" >&2; exit 2; }
model=$1 train=$2 val=$3 out=$4
shift 4
device=cpu
for ((i = 1; i <= $#; i++)); do [ "${!i}" = "--device" ] && j=$((i + 1)) && device=${!j}; done
mkdir -p "$out"
echo "{\"budget\": \"teacher\", \"eval\": $($golinear eval ppl "$model" --input "$val" --seq-len 2048 --json --device "$device")}"
for budget in ${BUDGETS:-64 128 256 512 1024}; do
  dir="$out/budget-$budget"
  summary=$($golinear linearize "$model" --data "$train" --out "$dir" --sinks 8 --window $((budget - 8)) \
            --seq-len 2048 --batch 8 "$@")
  echo "{\"budget\": $budget, \"linearize\": $summary, \"eval\": $($golinear eval ppl "$dir" --input "$val" --seq-len 2048 --json --device "$device")}"
done
