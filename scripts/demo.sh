#!/usr/bin/env bash
# The bundled model and its shipped linearized student (models/tiny-llama3-25m-linear, an adapter
# of the default recipe trained on the GPU, docs/RESULTS.md §2e): perplexity and a generation,
# no training. Then the main job: linearize it (default recipe: GDN + 8 sinks + a mean 56-token
# window allocated per layer by a uniform probe's per-layer perplexity cost + conv, mix split;
# LoRA r = 8 when there is an end-to-end stage) on a sample of its training text, then compare
# validation perplexity with the teacher's and generate from the linearized model. About 5
# minutes on 2 cores, plus the probe's sensitivity (CPU forwards of 16 K tokens per layer).
set -euo pipefail
cd "$(dirname "$0")/.."
golinear=build/golinear
model=models/tiny-llama3-25m
out=out/tiny-llama3-25m-gdn
tokens=${DEMO_TOKENS:-200000}
student=models/tiny-llama3-25m-linear
echo "teacher:          $($golinear eval ppl $model --input data/corpus_val.jsonl --seq-len 1024 --limit 32 --json)"
echo "shipped student:  $($golinear eval ppl $student --input data/corpus_val.jsonl --seq-len 1024 --limit 32 --json)"
$golinear generate $student --prompt "The kernel module" --max-new-tokens 40
mkdir -p out
if [ ! -d "$out" ]; then
  resume=""
  [ -d "$out.partial" ] && resume="--resume"
  $golinear linearize $model --data data/corpus_train_sample.jsonl.xz --out $out \
    --tokens $tokens --seq-len 1024 --stage transfer $resume
fi
echo "teacher:    $($golinear eval ppl $model --input data/corpus_val.jsonl --seq-len 1024 --limit 32 --json)"
echo "linearized: $($golinear eval ppl $out --input data/corpus_val.jsonl --seq-len 1024 --limit 32 --json)"
$golinear generate $out --prompt "The kernel module" --max-new-tokens 40
