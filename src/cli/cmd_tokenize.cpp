#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/loading.h"
#include "io/jsonl.h"
#include "tokenizer/tokenizer.h"

namespace golinear::cli {

int cmd_tokenize(const Argv& argv) {
  auto args = Args::parse("tokenize", argv, {{"input", true}, {"no-special", false}}, 1, 1);
  if (!args.ok()) return fail(args.error());
  if (!args->has("input")) return fail("golinear tokenize: --input FILE.jsonl is required");
  auto tokenizer = load_tokenizer(args->positional()[0]);
  if (!tokenizer.ok()) return fail(tokenizer.error());
  const std::string input = args->get("input");
  auto rows = jsonl_read(input);
  if (!rows.ok()) return fail(rows.error());
  const bool add_special = !args->has("no-special");
  for (size_t i = 0; i < rows->size(); ++i) {
    auto text = json_get<std::string>((*rows)[i], "text", str_cat(input, ": row ", i + 1));
    if (!text.ok()) return fail(text.error());
    Json out = {{"ids", tokenizer->encode(*text, add_special)}};
    std::printf("%s\n", out.dump().c_str());
  }
  return 0;
}

}  // namespace golinear::cli
