#!/bin/bash
# MMLU-format and LAMBADA-format files of the real tasks' sizes for timing `golinear eval` on an
# 8B-shaped model (docs/BENCHMARKS.md): the corpus's cloze passages (`golinear eval make-cloze`)
# repeated to 5,153 LAMBADA documents, and 14,042 MMLU test questions over 57 subjects (each a
# passage without its last word; the choices that word and the last words of three other
# passages) with 5 dev questions per subject for the 5-shot prompts. Timing data only: the
# questions are not MMLU's. Needs jq.
#   scripts/device/eval_format_data.sh GOLINEAR OUT_DIR
set -euo pipefail
G=${1:?golinear binary}
D=${2:?output folder}
mkdir -p "$D"
"$G" eval make-cloze --input data/corpus_val.jsonl --out "$D/cloze_val.jsonl" --max-items 100000
"$G" eval make-cloze --input data/corpus_train_sample.jsonl.xz --out "$D/cloze_train.jsonl" --max-items 100000
cat "$D/cloze_val.jsonl" "$D/cloze_train.jsonl" > "$D/passages.jsonl"
jq -c -s --argjson n 5153 '[range($n)] as $i | . as $p | $i[] | $p[. % ($p | length)]' \
  "$D/passages.jsonl" > "$D/lambada_format.jsonl"
mmlu() {  # mmlu COUNT OFFSET: COUNT questions, subject i % 57, from passage (OFFSET + i)
  jq -c -s --argjson n "$1" --argjson o "$2" '
    . as $p | ($p | length) as $m
    | def words(i): $p[i % $m].text | split(" ");
    [range($n)][] as $i
    | words($o + $i) as $w
    | ($i % 4) as $answer
    | [words($o + $i + 1)[-1], words($o + $i + 2)[-1], words($o + $i + 3)[-1]] as $others
    | {question: ($w[:-1] | join(" ")), subject: ("subject_\($i % 57)"),
       choices: ($others[:$answer] + [$w[-1]] + $others[$answer:]), answer: $answer}' "$D/passages.jsonl"
}
mmlu 14042 0 > "$D/mmlu_format_test.jsonl"
mmlu 285 7 > "$D/mmlu_format_dev.jsonl"   # 5 per subject
rm "$D/cloze_val.jsonl" "$D/cloze_train.jsonl" "$D/passages.jsonl"
wc -l "$D"/*.jsonl
