#include "serve/request.h"

#include <cstdio>
#include <random>

namespace golinear::serve {

Json api_error_json(const ApiError& e) {
  Json error = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) error["param"] = e.param;
  if (!e.code.empty()) error["code"] = e.code;
  return {{"error", error}};
}

namespace {

// The message on one line: control characters that came with the input (a model name, a JSON
// parser's or the chat template's excerpt) written as escapes.
std::string one_line(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\x%02x", c);
      out += escape;
    } else {
      out += (char)c;
    }
  }
  return out;
}

ApiError bad(const std::string& message, std::string param = "", std::string code = "") {
  return ApiError{400, one_line(message), "invalid_request_error", std::move(code),
                  std::move(param)};
}

std::optional<ApiError> parse_object(const std::string& body, OrderedJson* out) {
  try {
    *out = OrderedJson::parse(body);
  } catch (const std::exception& e) {
    return bad(std::string("the request body is not valid JSON: ") + e.what());
  }
  if (!out->is_object()) return bad("the request body must be a JSON object");
  return std::nullopt;
}

// field: absent or null → nullopt; present with the wrong type → error.
std::optional<ApiError> get_bool(const OrderedJson& body, const char* key, bool* value) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return bad(std::string("'") + key + "' must be a boolean", key);
  *value = it->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> get_number(const OrderedJson& body, const char* key, double lo, double hi,
                                   double* value) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return bad(std::string("'") + key + "' must be a number", key);
  double v = it->get<double>();
  if (!(v >= lo && v <= hi))
    return bad(str_cat("'", key, "' must be between ", lo, " and ", hi, ", got ", it->dump()), key);
  *value = v;
  return std::nullopt;
}

std::optional<ApiError> get_integer(const OrderedJson& body, const char* key, long lo, long hi,
                                    long* value) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) return bad(std::string("'") + key + "' must be an integer", key);
  // nlohmann reads a non-negative integer as unsigned.
  const bool out_of_range =
      it->is_number_unsigned()
          ? it->get<uint64_t>() > (uint64_t)hi || (lo > 0 && it->get<uint64_t>() < (uint64_t)lo)
          : it->get<int64_t>() < lo || it->get<int64_t>() > hi;
  if (out_of_range)
    return bad(str_cat("'", key, "' must be between ", lo, " and ", hi, ", got ", it->dump()), key);
  *value = it->is_number_unsigned() ? (long)it->get<uint64_t>() : (long)it->get<int64_t>();
  return std::nullopt;
}

std::optional<ApiError> check_model(const OrderedJson& body, const ServedModel& model) {
  auto it = body.find("model");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return bad("'model' must be a string", "model");
  if (it->get<std::string>() != model.name)
    return bad("The model `" + it->get<std::string>() + "` does not exist.", "model",
               "model_not_found");
  return std::nullopt;
}

// The body as a JSON object whose `model`, if any, is the served one.
std::optional<ApiError> parse_body(const std::string& text, const ServedModel& model,
                                   OrderedJson* body) {
  if (auto e = parse_object(text, body)) return e;
  return check_model(*body, model);
}

std::optional<ApiError> token_ids(const OrderedJson& list, const ServedModel& model,
                                  const char* param, std::vector<int32_t>* ids) {
  const long V = model.tokenizer->vocab_size();
  for (const auto& e : list) {
    if (!e.is_number_integer())
      return bad(str_cat("'", param, "' must hold integer token ids"), param);
    const bool in_range = e.is_number_unsigned() ? e.get<uint64_t>() < (uint64_t)V
                                                 : e.get<int64_t>() >= 0 && e.get<int64_t>() < V;
    if (!in_range)
      return bad(str_cat("token id ", e.dump(), " is out of vocabulary (ids 0 to ", V - 1, ")"),
                 param);
    ids->push_back((int32_t)e.get<int64_t>());
  }
  return std::nullopt;
}

std::optional<ApiError> prompt_ids(const OrderedJson& body, const ServedModel& model,
                                   std::vector<int32_t>* ids) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return bad("'prompt' is required", "prompt");
  const OrderedJson* prompt = &*it;
  // A list of one prompt (string or ids) is that prompt; several prompts are not served.
  if (prompt->is_array() && !prompt->empty() &&
      ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
    if (prompt->size() != 1) return bad("only one prompt per request is supported", "prompt");
    prompt = &(*prompt)[0];
  }
  if (prompt->is_string()) {
    const std::string text = prompt->get<std::string>();
    if (text.empty()) return bad("'prompt' must not be empty", "prompt");
    *ids = model.tokenizer->encode(text, /*add_special=*/true);
  } else if (prompt->is_array()) {
    if (auto e = token_ids(*prompt, model, "prompt", ids)) return e;
  } else {
    return bad("'prompt' must be a string or a list of token ids", "prompt");
  }
  if (ids->empty()) return bad("'prompt' must not be empty", "prompt");
  return std::nullopt;
}

// messages → the rendered chat prompt's ids (the template writes the BOS token itself).
std::optional<ApiError> chat_ids(const OrderedJson& body, const ServedModel& model,
                                 std::vector<int32_t>* ids) {
  if (!model.chat_template)
    return bad("this model has no chat template (give one with --chat-template-file)", "messages");
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) return bad("'messages' is required", "messages");
  if (!it->is_array()) return bad("'messages' must be a list", "messages");
  if (it->empty()) return bad("'messages' must not be empty", "messages");
  OrderedJson messages = OrderedJson::array();
  for (const auto& m : *it) {
    if (!m.is_object()) return bad("each message must be an object", "messages");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      return bad("each message needs a string 'role'", "messages");
    OrderedJson message = m;
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      message["content"] = "";
    } else if (content->is_array()) {  // [{"type": "text", "text": ...}, ...]
      std::string text;
      for (const auto& part : *content) {
        if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
            !part.contains("text") || !part["text"].is_string())
          return bad("message content parts must be {\"type\": \"text\", \"text\": string}",
                     "messages");
        text += part["text"].get<std::string>();
      }
      message["content"] = text;
    } else if (!content->is_string()) {
      return bad("message 'content' must be a string or a list of text parts", "messages");
    }
    messages.push_back(std::move(message));
  }
  OrderedJson context = {{"messages", messages},
                         {"add_generation_prompt", true},
                         {"bos_token", model.bos_token},
                         {"eos_token", model.eos_token}};
  if (auto tools = body.find("tools"); tools != body.end() && !tools->is_null()) {
    if (!tools->is_array()) return bad("'tools' must be a list", "tools");
    context["tools"] = *tools;
  }
  if (auto kwargs = body.find("chat_template_kwargs"); kwargs != body.end() && !kwargs->is_null()) {
    if (!kwargs->is_object()) return bad("'chat_template_kwargs' must be an object");
    for (const auto& [k, v] : kwargs->items())
      if (k != "messages") context[k] = v;
  }
  auto text = model.chat_template->render(context);
  if (!text.ok())
    return bad("the chat template failed on these messages: " + text.error(), "messages");
  *ids = model.tokenizer->encode(*text, /*add_special=*/false);
  if (ids->empty()) return bad("the rendered chat prompt is empty", "messages");
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> completion_request_parse(const std::string& body_text, bool chat,
                                                 const ServedModel& model, CompletionRequest* out) {
  OrderedJson body;
  if (auto e = parse_body(body_text, model, &body)) return e;
  *out = CompletionRequest{};
  out->chat = chat;
  GenerationParams& p = out->params;
  if (auto e = chat ? chat_ids(body, model, &p.prompt) : prompt_ids(body, model, &p.prompt))
    return e;

  if (auto e = get_bool(body, "stream", &out->stream)) return e;
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return bad("'stream_options' must be an object", "stream_options");
    if (auto e = get_bool(*it, "include_usage", &out->include_usage)) return e;
  }
  long n = 1;
  if (auto e = get_integer(body, "n", 1, 1 << 20, &n)) return e;
  if (n != 1) return bad("only n = 1 is supported", "n");

  double temperature = 1.0, top_p = 1.0, min_p = 0.0;
  long top_k = 0, seed = -1;
  if (auto e = get_number(body, "temperature", 0.0, 2.0, &temperature)) return e;
  if (auto e = get_number(body, "top_p", 1e-9, 1.0, &top_p)) return e;
  if (auto e = get_number(body, "min_p", 0.0, 1.0, &min_p)) return e;
  if (auto e = get_integer(body, "top_k", -1, 1L << 30, &top_k)) return e;
  if (auto e = get_integer(body, "seed", INT64_MIN, INT64_MAX, &seed)) return e;
  if (!body.contains("seed") || body["seed"].is_null()) seed = (long)(std::random_device{}() >> 1);
  p.sampler = {(float)temperature, (float)top_p, (uint64_t)seed, top_k < 0 ? 0 : (int)top_k,
               (float)min_p};

  if (chat) {
    if (auto e = get_bool(body, "logprobs", &out->logprobs)) return e;
    long top = 0;
    if (auto e = get_integer(body, "top_logprobs", 0, 20, &top)) return e;
    if (body.contains("top_logprobs") && !body["top_logprobs"].is_null() && !out->logprobs)
      return bad("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    if (out->logprobs) p.top_logprobs = (int)top;
  } else {
    long top = -1;
    if (auto e = get_integer(body, "logprobs", 0, 5, &top)) return e;
    out->logprobs = top >= 0;
    p.top_logprobs = (int)top;
  }

  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      p.stop.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      if (it->size() > 16) return bad("'stop' holds at most 16 strings", "stop");
      for (const auto& s : *it) {
        if (!s.is_string()) return bad("'stop' must be a string or a list of strings", "stop");
        p.stop.push_back(s.get<std::string>());
      }
    } else {
      return bad("'stop' must be a string or a list of strings", "stop");
    }
  }
  // ignore_eos (vLLM, llama.cpp): the end-of-sequence tokens do not end the completion, so it runs
  // to max_tokens or a stop string (load generators ask for exactly max_tokens this way).
  bool ignore_eos = false;
  if (auto e = get_bool(body, "ignore_eos", &ignore_eos)) return e;
  if (!ignore_eos) p.stop_ids = model.stop_ids;

  const long prompt_tokens = (long)p.prompt.size();
  const long N = model.max_context;
  if (prompt_tokens >= N)
    return bad(
        str_cat("This model's maximum context length is ", N, " tokens. However, your request has ",
                prompt_tokens, " input tokens. Please reduce the length of the input ",
                chat ? "messages." : "prompt."),
        chat ? "messages" : "prompt", "context_length_exceeded");
  long max_tokens = -1;
  const char* max_key =
      body.contains("max_completion_tokens") && !body["max_completion_tokens"].is_null()
          ? "max_completion_tokens"
          : "max_tokens";
  if (auto e = get_integer(body, max_key, 1, INT32_MAX, &max_tokens)) return e;
  if (max_tokens < 0) {
    max_tokens = chat ? N - prompt_tokens : std::min<long>(16, N - prompt_tokens);
  } else if (prompt_tokens + max_tokens > N) {
    return bad(str_cat("This model's maximum context length is ", N,
                       " tokens. However, you requested ", prompt_tokens + max_tokens, " tokens (",
                       prompt_tokens, " in the ", chat ? "messages" : "prompt", ", ", max_tokens,
                       " in the completion). Please reduce the length of the ",
                       chat ? "messages" : "prompt", " or completion."),
               max_key, "context_length_exceeded");
  }
  p.max_tokens = (int)max_tokens;
  return std::nullopt;
}

std::optional<ApiError> tokenize_request_parse(const std::string& body_text,
                                               const ServedModel& model,
                                               std::vector<int32_t>* ids) {
  ids->clear();
  OrderedJson body;
  if (auto e = parse_body(body_text, model, &body)) return e;
  const char* key = body.contains("content") ? "content" : "prompt";
  auto it = body.find(key);
  if (it == body.end() || !it->is_string())
    return bad("'content' (or 'prompt') must be a string", key);
  bool add_special = true;
  if (auto e = get_bool(body, "add_special", &add_special)) return e;
  if (auto e = get_bool(body, "add_special_tokens", &add_special)) return e;
  *ids = model.tokenizer->encode(it->get<std::string>(), add_special);
  return std::nullopt;
}

std::optional<ApiError> detokenize_request_parse(const std::string& body_text,
                                                 const ServedModel& model,
                                                 std::vector<int32_t>* ids) {
  ids->clear();
  OrderedJson body;
  if (auto e = parse_body(body_text, model, &body)) return e;
  auto it = body.find("tokens");
  if (it == body.end() || !it->is_array())
    return bad("'tokens' must be a list of token ids", "tokens");
  return token_ids(*it, model, "tokens", ids);
}


std::optional<ApiError> slot_filename_parse(const std::string& body_text, std::string* filename) {
  filename->clear();
  auto body = json_parse(body_text, "request body");
  if (body.ok() && body->is_object() && body->contains("filename") &&
      (*body)["filename"].is_string())
    *filename = (*body)["filename"].get<std::string>();
  const bool name_ok = !filename->empty() && filename->size() <= 200 && (*filename)[0] != '.' &&
                       filename->find_first_not_of(
                           "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
                           std::string::npos;
  if (name_ok) return std::nullopt;
  filename->clear();
  return bad(
      "the body must be {\"filename\": NAME}, NAME of letters, digits, '.', '_', '-' (not "
      "starting with '.')",
      "filename");
}

std::optional<ApiError> slot_record_parse(const std::string& text, const std::string& filename,
                                          const ServedModel& model, SlotRecord* record) {
  *record = SlotRecord{};
  auto bad_file = [&](const std::string& why) {
    return bad("slot file " + filename + ": " + why, "filename");
  };
  auto parsed = json_parse(text, filename);
  if (!parsed.ok()) return bad_file(parsed.error());
  const Json& file = *parsed;
  // Fields of another type are errors too (nlohmann's value() would throw).
  auto format = json_get_or<std::string>(file, "format", "", filename);
  auto version = json_get_or<long>(file, "version", 0, filename);
  if (!file.is_object() || !format.ok() || *format != "golinear-slot" || !version.ok() ||
      *version != 1)
    return bad_file("not a golinear slot file (version 1)");
  auto saved_for = json_get_or<std::string>(file, "model", "", filename);
  if (!saved_for.ok()) return bad_file(saved_for.error());
  if (*saved_for != model.name)
    return bad_file("saved for model '" + *saved_for + "', not '" + model.name + "'");
  auto tokens = json_get<std::vector<int32_t>>(file, "tokens", filename);
  auto calls = json_get<std::vector<int>>(file, "calls", filename);
  if (!tokens.ok()) return bad_file(tokens.error());
  if (!calls.ok()) return bad_file(calls.error());
  if ((long)tokens->size() >= model.max_context)
    return bad_file(str_cat(tokens->size(), " tokens reach the context of ", model.max_context));
  record->tokens = std::move(*tokens);
  record->calls = std::move(*calls);
  return std::nullopt;
}

}  // namespace golinear::serve
