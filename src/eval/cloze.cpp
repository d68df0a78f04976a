#include "eval/cloze.h"

#include <cctype>
#include <cstring>
#include <set>
#include <sstream>

#include "eval/synthetic_tasks.h"

namespace golinear::eval {

namespace {

std::vector<std::string> paragraphs_split(const std::string& text) {
  std::vector<std::string> paragraphs;
  std::string current;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      if (!current.empty()) paragraphs.push_back(std::move(current));
      current.clear();
      continue;
    }
    // A leading number followed by whitespace (a verse number) is dropped.
    size_t at = line.find_first_not_of(" \t");
    size_t digits_end = line.find_first_not_of("0123456789", at);
    if (digits_end != at && digits_end != std::string::npos && std::isspace((unsigned char)line[digits_end]))
      line = line.substr(digits_end + 1);
    current += line + "\n";
  }
  if (!current.empty()) paragraphs.push_back(std::move(current));
  return paragraphs;
}

std::string whitespace_collapse(const std::string& text) {
  std::string out;
  std::istringstream words(text);
  for (std::string word; words >> word;) out += (out.empty() ? "" : " ") + word;
  return out;
}

long word_count(const std::string& text) {
  std::istringstream words(text);
  long n = 0;
  for (std::string word; words >> word;) ++n;
  return n;
}

bool characters_allowed(const std::string& text) {
  for (unsigned char c : text)
    if (!std::isalnum(c) && !std::strchr(" ,.;:'\"!?-()", c)) return false;
  return true;
}

// The passage without its final '.', when it ends in " <letters>." with enough letters.
bool ends_in_target(const std::string& passage, int min_letters) {
  if (passage.size() < 2 || passage.back() != '.') return false;
  const size_t space = passage.rfind(' ');
  if (space == std::string::npos) return false;
  const std::string word = passage.substr(space + 1, passage.size() - space - 2);
  if ((int)word.size() < min_letters) return false;
  for (unsigned char c : word)
    if (!std::isalpha(c)) return false;
  return true;
}

}  // namespace

std::vector<std::string> cloze_passages_build(const std::vector<std::string>& documents,
                                              const ClozeOptions& options) {
  std::vector<std::string> passages;
  std::set<std::string> seen;
  for (const std::string& document : documents) {
    for (const std::string& raw : paragraphs_split(document)) {
      const std::string paragraph = whitespace_collapse(raw);
      if (paragraph.empty() || !characters_allowed(paragraph)) continue;
      std::vector<std::vector<std::string>> groups(1);
      long words = 0;
      for (const std::string& sentence : sentences_split(paragraph)) {
        const long n = word_count(sentence);
        if (!groups.back().empty() && words + n > options.max_words) {
          groups.emplace_back();
          words = 0;
        }
        groups.back().push_back(sentence);
        words += n;
      }
      for (const auto& group : groups) {
        std::string passage;
        for (const std::string& sentence : group) passage += (passage.empty() ? "" : " ") + sentence;
        const long n = word_count(passage);
        if (n < options.min_words || n > options.max_words) continue;
        if (!ends_in_target(passage, options.min_letters)) continue;
        passage.pop_back();
        if (!seen.insert(passage).second) continue;
        passages.push_back(passage);
        if ((long)passages.size() >= options.max_items) return passages;
      }
    }
  }
  return passages;
}

}  // namespace golinear::eval
