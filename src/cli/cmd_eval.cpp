#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/loading.h"
#include "eval/perplexity.h"
#include "io/text_data.h"

namespace golinear::cli {

namespace {

int eval_ppl(const Argv& argv) {
  auto args = Args::parse("eval ppl", argv, {{"input", true}, {"seq-len", true}, {"json", false}}, 1, 1);
  if (!args.ok()) return fail(args.error());
  if (!args->has("input")) return fail("golinear eval ppl: --input FILE is required");
  auto config = model_config_read(args->positional()[0] + "/config.json");
  if (!config.ok()) return fail(config.error());
  auto seq_len = args->get_int("seq-len", std::min(2048, config->max_position_embeddings), 2,
                               config->max_position_embeddings);
  if (!seq_len.ok()) return fail(seq_len.error());
  auto documents = text_documents_read(args->get("input"));
  if (!documents.ok()) return fail(documents.error());
  auto loaded = load_model_and_tokenizer(args->positional()[0]);
  if (!loaded.ok()) return fail(loaded.error());
  const Model& model = *loaded->model;
  const int bos = loaded->tokenizer.bos_id().value_or(model.config.bos_token_id);
  if (model.config.eos_token_ids.empty()) return fail("golinear eval ppl: the model defines no EOS token");
  auto stream = eval::eval_token_stream(*documents, loaded->tokenizer, model.config.eos_token_ids[0]);
  auto result = eval::perplexity(model, stream, bos, (int)*seq_len, true);
  if (!result.ok()) return fail(result.error());
  if (args->has("json")) {
    Json out = {{"ppl", result->ppl}, {"tokens", result->tokens}, {"windows", result->windows},
                {"seq_len", *seq_len}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("task  metric  value\nppl   ppl     %.4f   (%ld tokens, %ld windows of %ld)\n",
                result->ppl, result->tokens, result->windows, *seq_len);
  }
  return 0;
}

}  // namespace

int cmd_eval(const Argv& argv) {
  if (argv.empty()) return fail("golinear eval: missing TASK (ppl)");
  const std::string task = argv[0];
  Argv rest(argv.begin() + 1, argv.end());
  if (task == "ppl") return eval_ppl(rest);
  return fail("golinear eval: unknown task '" + task + "' (available: ppl)");
}

}  // namespace golinear::cli
