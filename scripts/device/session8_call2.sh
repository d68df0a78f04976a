#!/bin/bash
# Session 8, call 2: the candidate kernels of issues 15/16 (binaries of branches hdec-a/b/c: the
# hybrid decode kernel at 3-4 blocks per SM; kvdec, kvdec-b: the KV decode kernel on tensor cores
# with per-warp cp.async rings) first under their GPU tests, then A/B against main in this one
# call (hybrid: batched decode at 8B shapes, two rounds interleaved; KV decode: bench --mixers
# beside SDPA); then issue 15's 8B-shaped eval on the GPU: LAMBADA- and MMLU-format (5-shot) of
# the real sizes (scripts/device/eval_format_data.sh), linearized and base.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
tar xJf carry2/variants.tar.xz -C /tmp
V=/tmp/var
for v in hdec-a hdec-b hdec-c; do
  for t in test_mixers_cuda test_model_cuda test_runtime_cuda; do
    timeout 60 $V/$v/$t > /tmp/t.txt 2>&1; echo "$v $t exit $? $(grep -E '^\[  (PASSED|FAILED)' /tmp/t.txt | tr '\n' ' ')" >> $R
    echo "== $v $t" >> $OUT/tests.txt; grep -vE "^\[ +(RUN|OK) " /tmp/t.txt >> $OUT/tests.txt
  done
done
for t in test_kernels_cuda test_attention_cuda test_model_cuda test_runtime_cuda test_mixers_cuda; do
  timeout 60 $V/kvdec/$t > /tmp/t.txt 2>&1; echo "kvdec $t exit $? $(grep -E '^\[  (PASSED|FAILED)' /tmp/t.txt | tr '\n' ' ')" >> $R
  echo "== kvdec $t" >> $OUT/tests.txt; grep -vE "^\[ +(RUN|OK) " /tmp/t.txt >> $OUT/tests.txt
done
timeout 60 $V/kvdec-b/test_kernels_cuda --gtest_filter='CudaAttention.Decode*' > /tmp/t.txt 2>&1; echo "kvdec-b test_kernels_cuda Decode exit $? $(grep -E '^\[  (PASSED|FAILED)' /tmp/t.txt | tr '\n' ' ')" >> $R
echo "tests done at $(el) s" >> $R
# 8B-shaped eval
mkdir -p /tmp/evd /tmp/tok && tar xJf carry2/evalfmt.tar.xz -C /tmp/evd && tar xJf carry2/llama3tok.tar.xz -C /tmp/tok
W=/tmp/w8; mkdir -p $W; F=/tmp/evd/fmt
t=$(el); timeout 120 $G random-checkpoint --config bench/configs/llama-3.1-8b.json --tokenizer /tmp/tok/llama3/tokenizer.json --out $W/base > /dev/null 2>> $OUT/logs.txt; echo "checkpoint exit $? $(( $(el) - t )) s" >> $R
t=$(el); timeout 150 $G linearize $W/base --data data/corpus_train_sample.jsonl.xz --out $W/lin --device cuda --stage transfer --seq-len 4096 --tokens 65536 --window-by none --adapter >> $OUT/logs.txt 2>&1; echo "linearize exit $? $(( $(el) - t )) s" >> $R
for m in lin base; do
  t=$(el); timeout 120 $G eval lambada $W/$m --data $F/lambada_format.jsonl --device cuda --json > $OUT/lambada_$m.json 2>> $OUT/logs.txt
  echo "8B $m lambada-format (5,153 docs) exit $? $(( $(el) - t )) s" >> $R
  [ $m = base ] && continue
  t=$(el); timeout 150 $G eval mmlu $W/$m --data $F/mmlu_format_test.jsonl --dev $F/mmlu_format_dev.jsonl --limit 2000 --device cuda --json > $OUT/mmlu_$m.json 2>> $OUT/logs.txt
  echo "8B $m mmlu-format 5-shot (2,000 of 14,042) exit $? $(( $(el) - t )) s" >> $R
done
grep -E "memory|loaded" $OUT/logs.txt | tail -8 >> $R
BB="--config bench/configs/llama-3.1-8b.json --batches 256 --contexts 4096 --variants hybrid --decode-repeats 10"
for round in 1 2; do
  for v in main hdec-a hdec-b hdec-c; do
    g=$G; [ $v != main ] && g=$V/$v/golinear
    timeout 60 $g bench $BB > /tmp/b.md 2>&1; echo "hybrid round $round $v exit $?: $(grep -E '^\| linearized' /tmp/b.md | cut -d'|' -f3-6 | tr '\n' ' ')" >> $R
  done
done
echo "hybrid A/B done at $(el) s" >> $R
for v in main kvdec kvdec-b; do
  g=$G; [ $v != main ] && g=$V/$v/golinear
  timeout 90 $g bench --mixers --contexts 4096,32768,131072 --seq 8192 --no-backward > /tmp/m.txt 2>&1; echo "mixers $v exit $?" >> $R
  grep -iE "decode step" /tmp/m.txt | sed "s/^/$v /" >> $R; cat /tmp/m.txt >> $OUT/mixers.txt
done
timeout 60 python3 scripts/device/anchors_decode.py >> $R 2>&1
echo "KV A/B done at $(el) s" >> $R
echo "total $(el) s" >> $R
