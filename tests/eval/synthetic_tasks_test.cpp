// The RULER / S-NIAH generators: prompts fit the requested length in tokens (the bundled
// tokenizer), needles land at the requested depths, templates and answers are RULER's.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <sstream>

#include "eval/synthetic_tasks.h"
#include "eval/wordlist.h"
#include "io/text_data.h"
#include "tokenizer/tokenizer.h"

namespace golinear::eval {
namespace {

const std::string kTokenizer = std::string(GOLINEAR_MODEL_DIR) + "/tiny-llama3-25m/tokenizer.json";

class SyntheticTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = Tokenizer::load(kTokenizer);
    ASSERT_TRUE(loaded.ok()) << loaded.error();
    tokenizer_ = std::make_unique<Tokenizer>(std::move(*loaded));
    count_ = [this](const std::string& text) { return (long)tokenizer_->encode(text, true).size(); };
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  TokenCounter count_;
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// An essay haystack: varied sentences, so depths can be read off by sentence count.
std::string test_essay() {
  std::string essay;
  for (int i = 0; i < 400; ++i)
    essay += "Sentence number " + std::to_string(i) + " talks about rivers and hills. ";
  return essay;
}

TEST_F(SyntheticTest, NoiseNeedleFitsLengthAndSitsAtItsDepth) {
  for (long length : {512L, 1024L}) {
    for (double depth : {0.0, 25.0, 50.0, 75.0, 100.0}) {
      auto config = niah_config(1);
      ASSERT_TRUE(config.ok());
      config->depths = {depth};
      SyntheticRandom random(7);
      auto sample = needle_sample_generate(*config, length, count_, random);
      ASSERT_TRUE(sample.ok()) << sample.error();
      // Fits, and not by a wide margin: one more haystack line would not.
      const long used = count_(sample->prompt) + sample->max_new_tokens;
      EXPECT_LE(used, length);
      EXPECT_GT(used, length - 30) << "haystack too small for " << length;
      EXPECT_EQ(sample->prompt_tokens, count_(sample->prompt));
      // The needle line index is floor(n · depth / 100) among the n noise lines.
      const std::vector<std::string> lines = lines_of(sample->context);
      ASSERT_EQ(sample->needles.size(), 1u);
      const auto at = std::find(lines.begin(), lines.end(), sample->needles[0]);
      ASSERT_NE(at, lines.end());
      const long noise = (long)lines.size() - 1;
      EXPECT_EQ(at - lines.begin(), (long)(noise * depth / 100.0)) << "depth " << depth;
      for (const std::string& line : lines)
        if (line != sample->needles[0]) {
          EXPECT_EQ(line, kNoiseHaystack);
        }
    }
  }
}

TEST_F(SyntheticTest, NeedleTextTemplateAndAnswer) {
  auto config = niah_config(1);
  ASSERT_TRUE(config.ok());
  config->depths = {50};
  SyntheticRandom random(3);
  auto sample = needle_sample_generate(*config, 512, count_, random);
  ASSERT_TRUE(sample.ok()) << sample.error();
  std::smatch match;
  const std::regex needle("One of the special magic numbers for ([a-z]+)-([a-z]+) is: ([1-9][0-9]{6})\\.");
  ASSERT_TRUE(std::regex_match(sample->needles[0], match, needle)) << sample->needles[0];
  const auto& adjectives = needle_adjectives();
  const auto& nouns = needle_nouns();
  EXPECT_NE(std::find(adjectives.begin(), adjectives.end(), match[1].str()), adjectives.end());
  EXPECT_NE(std::find(nouns.begin(), nouns.end(), match[2].str()), nouns.end());
  ASSERT_EQ(sample->references, std::vector<std::string>{match[3].str()});
  const std::string key = match[1].str() + "-" + match[2].str();
  // Singular forms (one value asked), answer prefix at the end.
  EXPECT_EQ(sample->prompt.rfind("A special magic number is hidden within the following text. Make sure "
                                 "to memorize it. I will quiz you about the number afterwards.\n", 0), 0u);
  const std::string tail = "\nWhat is the special magic number for " + key +
                           " mentioned in the provided text? The special magic number for " + key +
                           " mentioned in the provided text is";
  ASSERT_GE(sample->prompt.size(), tail.size());
  EXPECT_EQ(sample->prompt.substr(sample->prompt.size() - tail.size()), tail);
  // Same seed, same sample; another seed, another needle.
  SyntheticRandom again(3), other(4);
  EXPECT_EQ(needle_sample_generate(*config, 512, count_, again)->prompt, sample->prompt);
  EXPECT_NE(needle_sample_generate(*config, 512, count_, other)->needles[0], sample->needles[0]);
}

TEST_F(SyntheticTest, EssayNeedleAfterTheRequestedShareOfSentences) {
  for (int variant : {2, 3}) {
    auto config = niah_config(variant);
    ASSERT_TRUE(config.ok());
    config->essay = test_essay();
    config->depths = {40};
    SyntheticRandom random(11);
    auto sample = needle_sample_generate(*config, 1024, count_, random);
    ASSERT_TRUE(sample.ok()) << sample.error();
    EXPECT_LE(count_(sample->prompt) + sample->max_new_tokens, 1024);
    const size_t at = sample->context.find(sample->needles[0]);
    ASSERT_NE(at, std::string::npos);
    const std::vector<std::string> before = sentences_split(sample->context.substr(0, at));
    const std::vector<std::string> all = sentences_split(sample->context);
    const long essay_sentences = (long)all.size() - 1;
    EXPECT_EQ((long)before.size(), (long)(essay_sentences * 40 / 100.0));
    if (variant == 3) {
      EXPECT_TRUE(std::regex_match(sample->references[0],
                                   std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")))
          << sample->references[0];
      EXPECT_NE(sample->prompt.find("special magic uuid for"), std::string::npos);
    }
  }
  auto config = niah_config(2);
  ASSERT_TRUE(config.ok());
  SyntheticRandom random(1);
  EXPECT_FALSE(needle_sample_generate(*config, 1024, count_, random).ok());  // no essay given
}

TEST_F(SyntheticTest, MultiNeedleSubtasks) {
  SyntheticRandom random(5);
  auto multikey = ruler_needle_config("multikey");
  ASSERT_TRUE(multikey.ok());
  auto mk = needle_sample_generate(*multikey, 1024, count_, random);
  ASSERT_TRUE(mk.ok()) << mk.error();
  EXPECT_EQ(mk->needles.size(), 4u);
  EXPECT_EQ(mk->references.size(), 1u);
  for (const std::string& needle : mk->needles) EXPECT_NE(mk->context.find(needle), std::string::npos);

  auto multivalue = ruler_needle_config("multivalue");
  auto mv = needle_sample_generate(*multivalue, 1024, count_, random);
  ASSERT_TRUE(mv.ok()) << mv.error();
  EXPECT_EQ(mv->references.size(), 4u);
  EXPECT_NE(mv->prompt.find("What are all the special magic numbers for"), std::string::npos);
  EXPECT_EQ(mv->prompt.substr(mv->prompt.size() - 4), " are");

  auto multiquery = ruler_needle_config("multiquery");
  auto mq = needle_sample_generate(*multiquery, 1024, count_, random);
  ASSERT_TRUE(mq.ok()) << mq.error();
  EXPECT_EQ(mq->references.size(), 4u);
  EXPECT_TRUE(std::regex_search(mq->prompt, std::regex("for [a-z]+-[a-z]+, [a-z]+-[a-z]+, [a-z]+-[a-z]+, and [a-z]+-[a-z]+ mentioned")));
  for (const auto* sample : {&*mk, &*mv, &*mq})
    EXPECT_LE(count_(sample->prompt) + sample->max_new_tokens, 1024);
  EXPECT_FALSE(ruler_needle_config("bogus").ok());
}

TEST_F(SyntheticTest, VariableTrackingChain) {
  SyntheticRandom random(9);
  auto sample = variable_tracking_sample_generate(1024, count_, random);
  ASSERT_TRUE(sample.ok()) << sample.error();
  EXPECT_LE(count_(sample->prompt) + sample->max_new_tokens, 1024);
  EXPECT_GT(count_(sample->prompt) + sample->max_new_tokens, 1024 - 40);
  ASSERT_EQ(sample->references.size(), 5u);
  std::smatch match;
  ASSERT_TRUE(std::regex_search(sample->context, match, std::regex("VAR ([A-Z]{5}) = ([0-9]{5})")));
  EXPECT_EQ(match[1].str(), sample->references[0]);
  size_t previous = sample->context.find(match[0].str());
  for (int hop = 1; hop < 5; ++hop) {
    const std::string link = "VAR " + sample->references[hop] + " = VAR " + sample->references[hop - 1];
    const size_t at = sample->context.find(link);
    ASSERT_NE(at, std::string::npos) << link;
    EXPECT_GT(at, previous);  // the chain is in order
    previous = at;
  }
  EXPECT_NE(sample->prompt.find("assigned the value " + match[2].str() + " in the text above."), std::string::npos);
  EXPECT_EQ(sample->prompt.substr(sample->prompt.size() - 10), "they are: ");
}

TEST_F(SyntheticTest, FrequentWordsAnswerIsTheThreeMostFrequent) {
  SyntheticRandom random(2);
  auto sample = frequent_words_sample_generate(1024, count_, random);
  ASSERT_TRUE(sample.ok()) << sample.error();
  EXPECT_LE(count_(sample->prompt) + sample->max_new_tokens, 1024);
  std::map<std::string, int> counts;
  std::istringstream words(sample->context);
  for (std::string word; words >> word;) ++counts[word];
  ASSERT_EQ(sample->references.size(), 3u);
  std::vector<std::pair<int, std::string>> ranked;
  for (const auto& [word, n] : counts)
    if (word != "...") ranked.push_back({n, word});
  std::sort(ranked.rbegin(), ranked.rend());
  ASSERT_GE(ranked.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(ranked[i].second, sample->references[i]);
  EXPECT_GT(ranked[2].first, ranked[3].first);  // no tie at the cut
}

TEST_F(SyntheticTest, TooShortALengthIsAnError) {
  auto config = niah_config(1);
  ASSERT_TRUE(config.ok());
  config->depths = {50};
  SyntheticRandom random(1);
  auto sample = needle_sample_generate(*config, 100, count_, random);
  ASSERT_FALSE(sample.ok());
  EXPECT_NE(sample.error().find("too short"), std::string::npos) << sample.error();
}

}  // namespace
}  // namespace golinear::eval
