// Request parsing (serve/request.h) and the served model's template and stop tokens, on the
// bundled model's directory.
#include "serve/request.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace golinear::serve {
namespace {

const std::string kModel = std::string(GOLINEAR_MODEL_DIR) + "/tiny-llama3-25m";

struct Fixture {
  Tokenizer tokenizer = std::move(Tokenizer::load(kModel + "/tokenizer.json")).value();
};

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(ServedModel, TemplateAndStopTokensFromTheDirectoryOrAFile) {
  Fixture f;
  auto model = served_model_make(kModel, "tiny", 100, f.tokenizer, {1}, "");
  ASSERT_TRUE(model.ok()) << model.error();
  EXPECT_TRUE(model->chat_template.has_value());
  EXPECT_EQ(model->bos_token, "<|begin_of_text|>");
  EXPECT_EQ(model->stop_ids, std::vector<int32_t>{1});  // config eos = the template's eos_token

  const std::string path =
      write_temp("golinear_serve_template.jinja",
                 "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}");
  auto custom = served_model_make(kModel, "tiny", 100, f.tokenizer, {1}, path);
  ASSERT_TRUE(custom.ok()) << custom.error();
  CompletionRequest request;
  auto error = completion_request_parse(R"({"messages": [{"role": "user", "content": "hi"}]})",
                                        true, *custom, &request);
  ASSERT_FALSE(error) << error->message;
  EXPECT_EQ(request.params.prompt, f.tokenizer.encode("<|begin_of_text|><user>hi", false));
  EXPECT_EQ(request.params.prompt[0], 0);  // BOS once, from the template
  EXPECT_EQ(request.params.max_tokens, 100 - (int)request.params.prompt.size());  // chat: the rest

  const std::string bad = write_temp("golinear_serve_bad.jinja", "{% for %}");
  auto broken = served_model_make(kModel, "tiny", 100, f.tokenizer, {1}, bad);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.error().find("golinear_serve_bad.jinja"), std::string::npos) << broken.error();
  std::remove(path.c_str());
  std::remove(bad.c_str());
}

TEST(CompletionRequest, IgnoreEosDropsTheStopTokensButNotTheStopStrings) {
  Fixture f;
  ServedModel model =
      std::move(served_model_make(kModel, "tiny", 50, f.tokenizer, {1}, "")).value();
  CompletionRequest r;
  ASSERT_FALSE(completion_request_parse(R"({"prompt": "Hello", "ignore_eos": true, "stop": "x"})",
                                        false, model, &r));
  EXPECT_TRUE(r.params.stop_ids.empty());
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"x"});
  ASSERT_FALSE(
      completion_request_parse(R"({"prompt": "Hello", "ignore_eos": false})", false, model, &r));
  EXPECT_EQ(r.params.stop_ids, std::vector<int32_t>{1});
  auto e = completion_request_parse(R"({"prompt": "Hello", "ignore_eos": 1})", false, model, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "ignore_eos");
  EXPECT_EQ(e->message, "'ignore_eos' must be a boolean");
}

TEST(CompletionRequest, DefaultsRangesAndTheContextLimit) {
  Fixture f;
  ServedModel model =
      std::move(served_model_make(kModel, "tiny", 50, f.tokenizer, {1}, "")).value();
  CompletionRequest r;
  ASSERT_FALSE(
      completion_request_parse(R"({"prompt": "Hello", "top_k": -1, "seed": 3})", false, model, &r));
  EXPECT_EQ(r.params.max_tokens, 16);
  EXPECT_EQ(r.params.sampler.top_k, 0);
  EXPECT_EQ(r.params.sampler.seed, 3u);
  EXPECT_EQ(r.params.sampler.temperature, 1.0f);
  EXPECT_EQ(r.params.prompt, f.tokenizer.encode("Hello", true));
  EXPECT_EQ(r.params.stop_ids, std::vector<int32_t>{1});

  auto e = completion_request_parse(R"({"prompt": "Hello", "max_tokens": 60})", false, model, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "context_length_exceeded");
  const int P = (int)f.tokenizer.encode("Hello", true).size();
  EXPECT_EQ(e->message,
            "This model's maximum context length is 50 tokens. However, you requested " +
                std::to_string(P + 60) + " tokens (" + std::to_string(P) +
                " in the prompt, 60 in the completion). Please reduce the length of "
                "the prompt or completion.");
  // Defaults are cut to the context: a prompt of 45 tokens leaves 5.
  std::string ids = "[";
  for (int i = 0; i < 45; ++i) ids += (i ? ",7" : "7");
  ASSERT_FALSE(completion_request_parse(R"({"prompt": )" + ids + "]}", false, model, &r));
  EXPECT_EQ(r.params.max_tokens, 5);
  for (const char* body : {R"({"prompt": "x", "max_tokens": 0})", R"({"prompt": "x", "top_k": -2})",
                           R"({"prompt": "x", "min_p": 1.5})", R"({"prompt": "x", "logprobs": 6})",
                           R"({"prompt": "x", "stream_options": 1})"}) {
    auto bad = completion_request_parse(body, false, model, &r);
    ASSERT_TRUE(bad) << body;
    EXPECT_EQ(bad->status, 400);
    EXPECT_FALSE(bad->param.empty()) << body;
  }
}

// Found by fuzz/serve_request (reproducers in fuzz/corpus/serve_request/crash_*): a content part
// whose "type" is not a string threw nlohmann's type_error out of the parser (HTTP 500, no error
// object), and an error echoing the input (the model name) could span several lines.
TEST(CompletionRequest, MalformedContentPartsAndEchoedInputGetOneLine) {
  Fixture f;
  ServedModel model =
      std::move(served_model_make(kModel, "tiny", 50, f.tokenizer, {1}, "")).value();
  CompletionRequest r;
  for (const char* body : {R"({"messages": [{"role": "user", "content": [{"type": 1, "text": "x"}]}]})",
                           R"({"messages": [{"role": "user", "content": [{"text": "x"}]}]})",
                           R"({"messages": [{"role": "user", "content": [{"type": null}]}]})"}) {
    std::optional<ApiError> e;
    ASSERT_NO_THROW(e = completion_request_parse(body, true, model, &r)) << body;
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->param, "messages") << body;
  }
  ASSERT_FALSE(completion_request_parse(
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]})", true,
      model, &r));

  auto e = completion_request_parse(R"({"model": "a\nb\u0001", "prompt": "x"})", false, model, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "The model `a\\nb\\x01` does not exist.");
  EXPECT_EQ(e->code, "model_not_found");
}

TEST(SlotRequests, FileNamesAndSlotFilesAreCheckedNotThrown) {
  Fixture f;
  ServedModel model =
      std::move(served_model_make(kModel, "tiny", 50, f.tokenizer, {1}, "")).value();
  std::string name;
  EXPECT_FALSE(slot_filename_parse(R"({"filename": "keeper.json"})", &name));
  EXPECT_EQ(name, "keeper.json");
  for (const char* body : {R"({"filename": "../x"})", R"({"filename": ".hidden"})",
                           R"({"filename": 5})", R"({})", "not json", R"({"filename": ""})"}) {
    auto e = slot_filename_parse(body, &name);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->param, "filename");
    EXPECT_TRUE(name.empty()) << body;
  }
  SlotRecord record;
  ASSERT_FALSE(slot_record_parse(
      R"({"format": "golinear-slot", "version": 1, "model": "tiny", "tokens": [0, 5], "calls": [2]})",
      "s.json", model, &record));
  EXPECT_EQ(record.tokens, (std::vector<int32_t>{0, 5}));
  EXPECT_EQ(record.calls, std::vector<int>{2});
  // Fields of another type used to throw (nlohmann's value()); now each is a 400 naming the file.
  for (const char* text :
       {R"({"format": 1, "version": 1, "model": "tiny", "tokens": [0], "calls": [1]})",
        R"({"format": "golinear-slot", "version": "1", "model": "tiny", "tokens": [0], "calls": [1]})",
        R"({"format": "golinear-slot", "version": 1, "model": 7, "tokens": [0], "calls": [1]})",
        R"({"format": "golinear-slot", "version": 1, "model": "other", "tokens": [0], "calls": [1]})",
        R"({"format": "golinear-slot", "version": 1, "model": "tiny", "tokens": [0.5], "calls": [1]})",
        R"([1])"}) {
    std::optional<ApiError> e;
    ASSERT_NO_THROW(e = slot_record_parse(text, "s.json", model, &record)) << text;
    ASSERT_TRUE(e) << text;
    EXPECT_EQ(e->status, 400);
    EXPECT_EQ(e->message.rfind("slot file s.json: ", 0), 0u) << e->message;
  }
  std::string tokens = "[0";
  for (int i = 1; i < 50; ++i) tokens += ",5";
  auto e = slot_record_parse(R"({"format": "golinear-slot", "version": 1, "model": "tiny", "tokens": )" +
                                 tokens + R"(], "calls": [50]})",
                             "s.json", model, &record);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "slot file s.json: 50 tokens reach the context of 50");
}

}  // namespace
}  // namespace golinear::serve
