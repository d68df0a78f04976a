// Stop strings and incremental text of generated tokens (serve/text_output.h), on the bundled
// model's tokenizer.
#include "serve/text_output.h"

#include <gtest/gtest.h>

namespace golinear::serve {
namespace {

Tokenizer tiny_tokenizer() {
  auto t = Tokenizer::load(std::string(GOLINEAR_MODEL_DIR) + "/tiny-llama3-25m/tokenizer.json");
  EXPECT_TRUE(t.ok()) << t.error();
  return std::move(t).value();
}

// Feeds `text`'s tokens one by one; returns what was sent and whether a stop string matched.
std::pair<std::string, bool> run(const Tokenizer& tokenizer, const std::string& text,
                                 std::vector<std::string> stop, std::string* after_each = nullptr) {
  TextOutput out(tokenizer, std::move(stop));
  std::string sent;
  for (int32_t id : tokenizer.encode(text, false)) {
    sent += out.push(id);
    if (after_each) *after_each += sent + "|";
    if (out.stopped()) break;
  }
  sent += out.finish();
  return {sent, out.stopped()};
}

TEST(TextOutput, NoStopStringsGivesTheDecodedText) {
  Tokenizer t = tiny_tokenizer();
  const std::string text = "Hello, wörld! 日本語 and more text.";
  auto [sent, stopped] = run(t, text, {});
  EXPECT_EQ(sent, text);
  EXPECT_FALSE(stopped);
}

TEST(TextOutput, CutsBeforeTheEarliestStopStringEvenAcrossTokens) {
  Tokenizer t = tiny_tokenizer();
  const std::string text = "One two three. User: four five";
  for (const std::string stop : {"User:", "ser: f", "e. U", "three", "o t"}) {
    auto [sent, stopped] = run(t, text, {"never", stop, ""});
    EXPECT_TRUE(stopped) << stop;
    EXPECT_EQ(sent, text.substr(0, text.find(stop))) << stop;
  }
  // Two stop strings: the one that occurs first wins.
  auto [sent, stopped] = run(t, text, {"four", "two"});
  EXPECT_EQ(sent, "One ");
}

TEST(TextOutput, HeldBackPrefixOfAStopStringIsReleasedWhenItDoesNotMatch) {
  Tokenizer t = tiny_tokenizer();
  std::string trace;
  auto [sent, stopped] = run(t, "abc User was here", {"User:"}, &trace);
  EXPECT_FALSE(stopped);
  EXPECT_EQ(sent, "abc User was here");
  // Never sent "User" before knowing it was not "User:": no prefix of the sent text at any point
  // ends in "User" unless more followed.
  EXPECT_EQ(trace.find("User|"), std::string::npos) << trace;
}

}  // namespace
}  // namespace golinear::serve
