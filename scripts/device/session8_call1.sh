#!/bin/bash
# Session 8, call 1: every GPU test binary (main with the packed eval forward and the GPU layer
# sensitivity merged); the default recipe with its sensitivity on the GPU, then its validation
# perplexity; eval on the GPU in packed passes against one pass per document (bundled model,
# LAMBADA- and MMLU-format files of the real sizes); serve under load twice against one server.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
mkdir -p /tmp/evd && tar xJf carry2/evalfmt.tar.xz -C /tmp/evd
for t in test_kernels_cuda test_ops_cuda test_gated_delta_cuda test_gated_linear_cuda test_attention_cuda \
         test_mixers_cuda test_model_cuda test_runtime_cuda test_eval_cuda test_analysis_cuda; do
  echo "== $t" >> $OUT/tests.txt; timeout 150 /tmp/bins/$t >> $OUT/tests.txt 2>&1; echo "$t exit $? at $(el) s" >> $R
done
echo "== test_train_cuda x2" >> $OUT/tests.txt
timeout 200 /tmp/bins/test_train_cuda --gtest_repeat=2 >> $OUT/tests.txt 2>&1; echo "test_train_cuda x2 exit $? at $(el) s" >> $R
grep -E "^\[  FAILED|^\[  PASSED|Failure" $OUT/tests.txt >> $R
grep -E "packed against alone" $OUT/tests.txt >> $R
timeout 300 $G linearize models/tiny-llama3-25m --data carry2/train.jsonl.xz --device cuda --seq-len 2048 --batch 8 \
  --seed 0 --tokens 4194304 --e2e-tokens 12582912 --adapter --out /tmp/default > $OUT/train.txt 2>&1
echo "default linearize exit $? at $(el) s" >> $R
grep -E "perplexity cost|window|sensitivity|cuda\)" $OUT/train.txt | tail -12 >> $R
timeout 60 $G eval ppl /tmp/default --input data/corpus_val.jsonl --seq-len 2048 --json --device cuda >> $R 2>> $OUT/train.txt
echo "default ppl exit $? at $(el) s" >> $R
cp /tmp/default/linearization.json $OUT/default_linearization.json 2>/dev/null
for m in models/tiny-llama3-25m models/tiny-llama3-25m-linear; do
  for b in 1 64; do
    t=$(el); timeout 120 $G eval lambada $m --data /tmp/evd/fmt/lambada_format.jsonl --device cuda --batch $b --json > /tmp/l.json 2>> $OUT/logs.txt
    echo "lambada-format $m batch $b exit $? $(( $(el) - t )) s: $(head -c 400 /tmp/l.json)" >> $R
  done
  t=$(el); timeout 150 $G eval mmlu $m --data /tmp/evd/fmt/mmlu_format_test.jsonl --dev /tmp/evd/fmt/mmlu_format_dev.jsonl --device cuda --json > /tmp/m.json 2>> $OUT/logs.txt
  echo "mmlu-format 5-shot $m batch 64 exit $? $(( $(el) - t )) s: $(head -c 300 /tmp/m.json)" >> $R
done
serve_load models/tiny-llama3-25m-linear 256 256 1024
echo "total $(el) s" >> $R
