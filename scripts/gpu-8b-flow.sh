#!/bin/bash
# An 8B-shaped random checkpoint through the CLI on the GPU machine (docs/RANDOM_CHECKPOINTS.md,
# docs/BENCHMARKS.md "An 8B checkpoint through the CLI"), from the repository root:
#   OUT=DIR bash scripts/gpu-8b-flow.sh llama|qwen3 GOLINEAR TOKENIZER_JSON [base]
# GOLINEAR: the CUDA build of the CLI; TOKENIZER_JSON: the model family's real tokenizer
# (build/npm/{llama3,qwen3}/tokenizer.json). Steps: random-checkpoint, linearize --device cuda
# --stage both at seq_len 4096, eval ppl, generate, score (prefill and decode); with `base` also
# eval ppl and score of the base checkpoint and the decode-vs-prefill difference of both. Each
# step runs under a timeout; its wall time, peak host RSS (getrusage of the command) and peak GPU
# memory (nvidia-smi, 250 ms samples) go to $OUT/<model>-8b.log. The checkpoints (16 GB each)
# live in a scratch folder (WORK, default /tmp/w8) and are removed at the end.
set -u
m=${1:?usage: gpu-8b-flow.sh llama|qwen3 GOLINEAR TOKENIZER_JSON [base]}
G=${2:?golinear binary}
TOK=${3:?tokenizer.json}
W=${WORK:-/tmp/w8}
OUT=${OUT:-$W/logs}
mkdir -p "$W" "$OUT"
case $m in
  llama) cfg=bench/configs/llama-3.1-8b.json ;;
  qwen3) cfg=bench/configs/qwen3-8b.json ;;
  *) echo "unknown model '$m' (llama or qwen3)" >&2; exit 2 ;;
esac
L=$OUT/$m-8b.log
step() {  # step NAME SECONDS COMMAND...
  local n=$1 lim=$2; shift 2
  echo "== $n: $*" >>"$L"
  local t0; t0=$(date +%s.%N)
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 250 >"$W/smi.$n" 2>/dev/null &
  local smi=$!
  timeout "$lim" python3 -c "import resource,subprocess,sys; r=subprocess.call(sys.argv[1:]); print('== peak host RSS of the command: %.2f GiB' % (resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss/2**20), file=sys.stderr); sys.exit(r)" "$@" >"$W/$m-$n.out" 2>>"$L"
  local rc=$?
  kill $smi 2>/dev/null
  echo "== $n: peak GPU memory used (nvidia-smi, 250 ms samples): $(sort -n "$W/smi.$n" | tail -1) MiB" >>"$L"
  echo "== $n: exit $rc, $(python3 -c "print(round($(date +%s.%N)-$t0,1))") s" >>"$L"
  tail -c 1500 "$W/$m-$n.out" >>"$L"
}
step checkpoint 240 "$G" random-checkpoint --config $cfg --tokenizer "$TOK" --out "$W/$m"
step linearize 300 "$G" linearize "$W/$m" --data data/corpus_train_sample.jsonl.xz --out "$W/$m-lin" \
    --device cuda --stage both --seq-len 4096 --tokens 409600 --e2e-tokens 40960
step ppl 100 "$G" eval ppl "$W/$m-lin" --input data/corpus_val.jsonl --seq-len 4096 --limit 4 --device cuda --json
step generate 90 "$G" generate "$W/$m-lin" --prompt "The history of the city begins" --max-new-tokens 32 --device cuda
printf '{"text": "The quick brown fox jumps over the lazy dog, and the dog sleeps on."}\n{"text": "Linear attention keeps a constant-size state for every sequence it serves."}\n' >"$W/s.jsonl"
step score 90 "$G" score "$W/$m-lin" --input "$W/s.jsonl" --device cuda
step score-decode 90 "$G" score "$W/$m-lin" --input "$W/s.jsonl" --mode decode --device cuda
if [ "${4:-}" = base ]; then
  step ppl-base 100 "$G" eval ppl "$W/$m" --input data/corpus_val.jsonl --seq-len 4096 --limit 4 --device cuda --json
  step score-base 90 "$G" score "$W/$m" --input "$W/s.jsonl" --device cuda
  step score-base-decode 90 "$G" score "$W/$m" --input "$W/s.jsonl" --mode decode --device cuda
  python3 - "$W/$m-score.out" "$W/$m-score-decode.out" "$W/$m-score-base.out" "$W/$m-score-base-decode.out" >>"$L" 2>&1 <<'PY'
import json, sys
def logprobs(path):
    out = []
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        for key, value in json.loads(line).items():
            if isinstance(value, list) and value and isinstance(value[0], (int, float)) and "logprob" in key:
                out += value
    return out
for a, b, what in [(sys.argv[1], sys.argv[2], "linearized"), (sys.argv[3], sys.argv[4], "teacher")]:
    d = [abs(p - q) for p, q in zip(logprobs(a), logprobs(b))]
    print(f"== score {what}: decode vs prefill over {len(d)} tokens: max |Δ log p| {max(d):.4g}, mean {sum(d)/len(d):.4g}")
PY
fi
rm -rf "${W:?}/$m" "${W:?}/$m-lin"
grep "^== \|memory:" "$L"
