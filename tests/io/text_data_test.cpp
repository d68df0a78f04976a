// Training/evaluation text files (io/text_data.h): .jsonl, .txt and both compressed with xz — the
// format the bundled corpus ships in. Files made here; the xz ones with liblzma itself.
#include <gtest/gtest.h>
#include <lzma.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/text_data.h"

namespace golinear {
namespace {

namespace fs = std::filesystem;

class TextData : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("golinear_text_data_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  fs::path dir_;
};

// One xz stream holding `text` (liblzma's preset 6, CRC64).
std::string xz(const std::string& text) {
  std::string out(lzma_stream_buffer_bound(text.size()), '\0');
  size_t pos = 0;
  const lzma_ret r = lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, nullptr,
                                             reinterpret_cast<const uint8_t*>(text.data()), text.size(),
                                             reinterpret_cast<uint8_t*>(out.data()), &pos, out.size());
  EXPECT_EQ(r, LZMA_OK);
  out.resize(pos);
  return out;
}

TEST_F(TextData, ReadsJsonlAndTxtPlainAndCompressed) {
  const std::string jsonl = "{\"text\": \"The cat sat.\"}\n\n{\"text\": \"caf\\u00e9\"}\n";
  const std::vector<std::string> want = {"The cat sat.", "caf\xc3\xa9"};
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"a.jsonl", jsonl}, {"a.jsonl.xz", xz(jsonl)}}) {
    auto docs = text_documents_read(write(name, bytes));
    ASSERT_TRUE(docs.ok()) << name << ": " << docs.error();
    EXPECT_EQ(*docs, want) << name;
  }
  auto txt = text_documents_read(write("b.txt.xz", xz("line one\nline two\n")));
  ASSERT_TRUE(txt.ok()) << txt.error();
  EXPECT_EQ(*txt, std::vector<std::string>{"line one\nline two\n"});
}

// Concatenated xz streams (as `cat a.xz b.xz` makes) read as one file.
TEST_F(TextData, ReadsConcatenatedXzStreams) {
  const std::string path =
      write("c.jsonl.xz", xz("{\"text\": \"first\"}\n") + xz("{\"text\": \"second\"}\n"));
  auto docs = text_documents_read(path);
  ASSERT_TRUE(docs.ok()) << docs.error();
  EXPECT_EQ(*docs, (std::vector<std::string>{"first", "second"}));
}

// Truncated, corrupted or non-xz bytes, and an empty file: one error naming the file, no crash.
TEST_F(TextData, BadXzDataIsAnErrorNamingTheFile) {
  const std::string good = xz("{\"text\": \"hello\"}\n");
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x5a;
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"truncated.jsonl.xz", good.substr(0, good.size() - 7)},
           {"flipped.jsonl.xz", flipped},
           {"plain.jsonl.xz", "{\"text\": \"not compressed\"}\n"},
           {"empty.jsonl.xz", ""}}) {
    const std::string path = write(name, bytes);
    auto docs = text_documents_read(path);
    ASSERT_FALSE(docs.ok()) << name;
    EXPECT_EQ(docs.error().rfind(path + ": ", 0), 0u) << docs.error();
    EXPECT_EQ(docs.error().find('\n'), std::string::npos) << docs.error();
  }
}

// A compressed JSONL line that is not an object with "text": the error names the file and line.
TEST_F(TextData, AJsonlErrorInsideXzNamesTheLine) {
  const std::string path = write("d.jsonl.xz", xz("{\"text\": \"ok\"}\n{\"txt\": 1}\n"));
  auto docs = text_documents_read(path);
  ASSERT_FALSE(docs.ok());
  EXPECT_NE(docs.error().find(path + ":2"), std::string::npos) << docs.error();
}

}  // namespace
}  // namespace golinear
