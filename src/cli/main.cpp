#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "cli/commands.h"

namespace {

constexpr const char* kUsage = R"(golinear — turn a pretrained Llama/Qwen checkpoint into a linear-time model

usage: golinear COMMAND MODEL [options]      (MODEL: a Hugging Face checkpoint directory, or a
                                             directory written by linearize, --adapter ones too)

commands:
  info MODEL                      architecture, layers, heads, parameters, dtype, memory (JSON)
  tokenize MODEL --input FILE     {"text"} lines → {"ids"} lines   [--no-special]
  generate MODEL --prompt TEXT    stream a continuation  [--max-new-tokens N --temperature T
                                  --top-p P --seed S --device cpu|cuda]
  score MODEL --input FILE        {"text"} or {"ids"} lines → {"ids", "logprobs"} lines
                                  [--mode prefill|decode --device cpu|cuda]
  linearize MODEL --data FILE --out DIR
                                  replace attention by a linear mixer: attention transfer, then
                                  end-to-end distillation  [--mixer gdn|gla|kgla|hedgehog|none
                                  --mix split|gate|add|scale|gate-lse --sinks S --window W
                                  (S, W: one number, or one per layer: 8,16,...)
                                  --window-by probe|hardness|DIR|none (per-layer windows at the same
                                  total; default probe)
                                  --conv|--no-conv --linear-rope --keep-full-layers LIST --keep-full K
                                  --select hard|uniform --tokens N|--steps N --seq-len T --batch B
                                  --lr LR --seed S --stage transfer|e2e|both --e2e-tokens N
                                  --e2e-lr LR --sweep RECIPES.json --init DIR --device cpu|cuda
                                  --adapter (DIR holds only the new parameters and names MODEL)
                                  (cuda: mixers gdn and none, every mix, conv and window; gla,
                                  kgla, hedgehog and --sweep run on the CPU only)
                                  --resume --stop-after N (stop after N steps of a stage, as an
                                  interruption would: for testing --resume)]
  eval ppl MODEL --input FILE     perplexity  [--seq-len N --limit WINDOWS --json --device cpu|cuda]
  eval TASK MODEL --data FILE     lambada, piqa, arc_easy, arc_challenge, hellaswag, winogrande
                                  scored as lm-evaluation-harness  [--limit N --json
                                  --log-samples FILE --no-bos-legacy --device cpu|cuda]; mmlu
                                  also --dev FILE
  eval niah MODEL --variant 1|2|3 --length T   S-NIAH  [--depths LIST --samples N --haystack F
                                  --device cpu|cuda]
  eval ruler MODEL --length T     RULER-style synthetic tasks  [--subtask NAME --samples N
                                  --device cpu|cuda]
  eval make-cloze --input FILE --out FILE   a LAMBADA-format cloze set from JSONL text
  bench                           mixer prefill/decode timings on the GPU (CUDA build)  [--mixers
                                  --json --seq 2048,... --contexts 4096,... --repeats N]
  bench --config FILE.json | --model DIR
                                  whole-model prefill/decode tokens/s and GPU memory against
                                  context, linearized vs full attention  [--contexts 4096,...
                                  --variants hybrid,full --json --json-file F]; bench --help
  bench --transfer --config FILE.json
                                  attention-transfer tokens/s of that shape, random weights
                                  [--seq-len T --batch B --steps N --json]
  analyze MODEL --data FILE --out DIR
                                  diagnostics per layer, head and position (key concentration,
                                  projection residual, sink mass, hardness), NMSE of students;
                                  JSON, CSV, SVG plots, report.md  [--student DIR[,DIR...]
                                  --tokens N --seq-len T --sinks S --window W --seed S
                                  --device cpu|cuda (cuda: the teacher's forward on the GPU;
                                  diagnostics and students on the CPU)]
  serve MODEL                     OpenAI-compatible HTTP server with continuous batching and a
                                  prompt-state cache (docs/SERVE.md)  [--host H --port P
                                  --parallel N --max-queue N --api-key K | --api-key-file F
                                  --cache-ram MiB --chat-template-file F --timeout S
                                  --prefill-chunk N --max-context N --body-limit BYTES
                                  --model-name NAME --threads N --slot-save-path DIR
                                  --device cpu|cuda]
  random-checkpoint --config CONFIG.json --tokenizer DIR|FILE --out DIR
                                  a Hub-layout checkpoint of random bf16 weights of any config
                                  (e.g. bench/configs/llama-3.1-8b.json), sharded like the Hub's
                                  [--seed S --max-shard-size 5GB]; random-checkpoint --help

The bundled default model is models/tiny-llama3-25m.
)";

}  // namespace

static int run_command(int argc, char** argv);

// The library reports errors as Results; anything thrown past a command (out of memory, a
// filesystem error) still ends as one line and a non-zero exit, never as std::terminate.
int main(int argc, char** argv) {
  try {
    return run_command(argc, argv);
  } catch (const std::exception& e) {
    return golinear::cli::fail(std::string("internal error: ") + e.what());
  }
}

static int run_command(int argc, char** argv) {
  using namespace golinear::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  Argv rest(argv + 2, argv + argc);
  if (command == "info") return cmd_info(rest);
  if (command == "tokenize") return cmd_tokenize(rest);
  if (command == "generate") return cmd_generate(rest);
  if (command == "score") return cmd_score(rest);
  if (command == "linearize") return cmd_linearize(rest);
  if (command == "eval") return cmd_eval(rest);
  if (command == "bench") return cmd_bench(rest);
  if (command == "analyze") return cmd_analyze(rest);
  if (command == "random-checkpoint") return cmd_random_checkpoint(rest);
  if (command == "serve") return cmd_serve(rest);
  return fail("unknown command '" + command + "' (see golinear --help)");
}
