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

int cmd_random_checkpoint(const Argv& argv) {
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
