// The server's request parsers (serve/request.h) on arbitrary bodies, against the bundled
// tiny-llama3-25m (its tokenizer, chat template and stop token) served with a 128-token context:
// each input goes, as the body, to the completion, chat-completion, tokenize, detokenize and slot
// parsers (and, as a slot file, to the restore parser). An accepted request keeps the header's
// promises: a prompt of ≥ 1 ids in the vocabulary, 1 ≤ max_tokens, prompt + max_tokens within
// the context, sampling options in their ranges, ids in the vocabulary, a safe slot file name; a
// refused one is a 4xx with a non-empty one-line message that serializes.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "serve/request.h"

namespace {

using namespace golinear;
using namespace golinear::serve;

constexpr long kContext = 128;

void require(bool ok, const char* what, const std::string& detail = "") {
  if (ok) return;
  std::fprintf(stderr, "serve_request_fuzz: %s %s\n", what, detail.c_str());
  std::abort();
}

void check_refusal(const ApiError& e) {
  require(e.status >= 400 && e.status < 500, "refused with a status that is not 4xx:",
          std::to_string(e.status));
  require(!e.message.empty(), "refused with an empty message");
  require(e.message.find('\n') == std::string::npos, "refused with a message of several lines:",
          e.message);
  require(!e.type.empty(), "refused with an empty error type");
  (void)api_error_json(e).dump(-1, ' ', false, Json::error_handler_t::replace);
}

void check_ids(const std::vector<int32_t>& ids, const ServedModel& model) {
  for (int32_t id : ids)
    require(id >= 0 && id < model.tokenizer->vocab_size(), "token id outside the vocabulary:",
            std::to_string(id));
}

void check_completion(const CompletionRequest& r, bool chat, const ServedModel& model) {
  const GenerationParams& p = r.params;
  require(r.chat == chat, "chat flag not kept");
  require(!p.prompt.empty(), "accepted an empty prompt");
  check_ids(p.prompt, model);
  require(p.max_tokens >= 1, "max_tokens < 1:", std::to_string(p.max_tokens));
  require((long)p.prompt.size() + p.max_tokens <= model.max_context,
          "prompt + max_tokens beyond the context");
  const auto& s = p.sampler;
  require(s.temperature >= 0 && s.temperature <= 2, "temperature out of [0, 2]");
  require(s.top_p > 0 && s.top_p <= 1, "top_p out of (0, 1]");
  require(s.min_p >= 0 && s.min_p <= 1, "min_p out of [0, 1]");
  require(s.top_k >= 0, "top_k < 0");
  if (r.logprobs)
    require(p.top_logprobs >= 0 && p.top_logprobs <= (chat ? 20 : 5), "top_logprobs out of range");
  else
    require(p.top_logprobs < 0, "top_logprobs without logprobs");
  require(p.stop.size() <= 16, "more than 16 stop strings");
  require(p.stop_ids.empty() || p.stop_ids == model.stop_ids, "stop tokens not the model's");
}

const ServedModel& served() {
  static const Tokenizer tokenizer = [] {
    auto t = Tokenizer::load(std::string(GOLINEAR_MODEL_DIR) + "/tiny-llama3-25m/tokenizer.json");
    if (!t.ok()) std::abort();
    return *t;
  }();
  static const ServedModel model = [] {
    auto m = served_model_make(std::string(GOLINEAR_MODEL_DIR) + "/tiny-llama3-25m", "tiny",
                               kContext, tokenizer, {1}, "");
    if (!m.ok() || !m->chat_template) std::abort();
    return *m;
  }();
  return model;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const ServedModel& model = served();
  const std::string body(reinterpret_cast<const char*>(data), size);

  for (bool chat : {false, true}) {
    CompletionRequest request;
    if (auto e = completion_request_parse(body, chat, model, &request))
      check_refusal(*e);
    else
      check_completion(request, chat, model);
  }

  std::vector<int32_t> ids;
  if (auto e = tokenize_request_parse(body, model, &ids)) check_refusal(*e);
  else check_ids(ids, model);
  if (auto e = detokenize_request_parse(body, model, &ids)) check_refusal(*e);
  else check_ids(ids, model);

  std::string filename;
  if (auto e = slot_filename_parse(body, &filename)) {
    check_refusal(*e);
  } else {
    require(!filename.empty() && filename.size() <= 200 && filename[0] != '.' &&
                filename.find('/') == std::string::npos,
            "unsafe slot file name:", filename);
  }
  SlotRecord record;
  if (auto e = slot_record_parse(body, "slot.json", model, &record)) check_refusal(*e);
  else require((long)record.tokens.size() < model.max_context, "slot file beyond the context");
  return 0;
}
