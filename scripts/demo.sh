#!/usr/bin/env bash
# The main job on the bundled model: linearize it (default recipe: GDN + 8 sinks + a mean
# 56-token window allocated per layer by a probe + conv, mix split) on a sample of its training text, then compare validation perplexity
# with the teacher's and generate from the linearized model. About 5 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
golinear=build/golinear
model=models/tiny-llama3-25m
out=out/tiny-llama3-25m-gdn
tokens=${DEMO_TOKENS:-200000}
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
