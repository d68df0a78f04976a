// Requests of the OpenAI-compatible API, parsed and checked: a body either becomes generation
// parameters (serve/scheduler.h) or an ApiError with the status and message the client gets,
// shaped as OpenAI's {"error": {"message", "type", "param", "code"}}.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "serve/scheduler.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace golinear::serve {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string code;   // e.g. "context_length_exceeded"; empty: null
  std::string param;  // the request field at fault; empty: null
};

Json api_error_json(const ApiError& error);

// What the requests are checked against.
struct ServedModel {
  std::string name;      // the id of GET /v1/models; requests naming another model get 400
  long max_context = 0;  // prompt + completion tokens
  const Tokenizer* tokenizer = nullptr;
  std::optional<ChatTemplate> chat_template;  // none: /v1/chat/completions answers 400
  std::string bos_token, eos_token;           // the template's bos_token / eos_token
  std::vector<int32_t> stop_ids;              // end-of-sequence tokens
};

struct CompletionRequest {
  bool chat = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
  bool logprobs = false;
  GenerationParams params;
};

// POST /v1/completions (chat false) or /v1/chat/completions (chat true). Fields read: model,
// prompt (a string, a list of token ids, or a list of one of those) or messages, max_tokens /
// max_completion_tokens, stop, seed, temperature, top_p, top_k, min_p, n (1 only), stream,
// stream_options, logprobs (completions: an integer ≤ 5; chat: a boolean with top_logprobs ≤
// 20), ignore_eos (as vLLM: the end-of-sequence tokens do not stop the completion),
// chat_template_kwargs.enable_thinking. Other fields are ignored. A missing seed draws one at
// random; a missing max_tokens is 16 for completions (as OpenAI) and the rest of the context for
// chat (as vLLM).
std::optional<ApiError> completion_request_parse(const std::string& body, bool chat,
                                                 const ServedModel& model, CompletionRequest* out);

// POST /tokenize: {"content" | "prompt": text, "add_special": bool (default true)}.
std::optional<ApiError> tokenize_request_parse(const std::string& body, const ServedModel& model,
                                               std::vector<int32_t>* ids);
// POST /detokenize: {"tokens": [ids]}.
std::optional<ApiError> detokenize_request_parse(const std::string& body, const ServedModel& model,
                                                 std::vector<int32_t>* ids);

// POST /slots/ID?action=save|restore: {"filename": NAME}, NAME of 1 to 200 letters, digits, '.',
// '_', '-', not starting with '.' (so it names a file inside --slot-save-path).
std::optional<ApiError> slot_filename_parse(const std::string& body, std::string* filename);
// The slot file `filename` that a save wrote ({"format": "golinear-slot", "version": 1, "model",
// "tokens", "calls"}), for restore: saved for the served model, fewer tokens than its context.
// (The scheduler checks the rest: calls covering the tokens, ids in the vocabulary.)
std::optional<ApiError> slot_record_parse(const std::string& text, const std::string& filename,
                                          const ServedModel& model, SlotRecord* record);

}  // namespace golinear::serve

namespace golinear::serve {

// The ServedModel of the checkpoint `dir` (the one holding the tokenizer files: an adapter's
// base): name, context limit, the chat template of `chat_template_file` or else of
// dir/tokenizer_config.json (none when neither has one), its
// bos/eos strings, and the stop tokens: `eos_ids` (config.json's eos_token_id), the template's
// eos_token and the end-of-turn tokens <|eot_id|> (Llama-3) and <|im_end|> (Qwen) when the
// vocabulary has them. `tokenizer` must outlive the result.
Result<ServedModel> served_model_make(const std::string& dir, const std::string& name,
                                      long max_context, const Tokenizer& tokenizer,
                                      const std::vector<int>& eos_ids,
                                      const std::string& chat_template_file);

}  // namespace golinear::serve
