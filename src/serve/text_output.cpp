#include "serve/text_output.h"

#include <algorithm>

namespace golinear::serve {

TextOutput::TextOutput(const Tokenizer& tokenizer, std::vector<std::string> stop)
    : decoder_(tokenizer, /*skip_special=*/true) {
  for (auto& s : stop)
    if (!s.empty()) stop_.push_back(std::move(s));
  for (const auto& s : stop_) longest_stop_ = std::max(longest_stop_, s.size());
}

std::string TextOutput::push(int32_t id) {
  if (stopped_) return "";
  const size_t before = text_.size();
  text_ += decoder_.push(id);
  if (text_.size() == before) return "";
  // A stop string can only end in the new text; it may start up to its length − 1 before it.
  const size_t longest = longest_stop_;
  const size_t from = before >= longest ? before - longest + 1 : 0;
  size_t cut = std::string::npos;
  for (const auto& s : stop_) {
    size_t at = text_.find(s, from);
    if (at != std::string::npos) cut = std::min(cut, at);
  }
  if (cut != std::string::npos) {
    text_.resize(std::max(cut, sent_));
    stopped_ = true;
    std::string out = text_.substr(sent_);
    sent_ = text_.size();
    return out;
  }
  return release();
}

std::string TextOutput::release() {
  // Hold back the longest tail of text_ that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const auto& s : stop_)
    for (size_t n = std::min(s.size() - 1, text_.size() - sent_); n > hold; --n)
      if (text_.compare(text_.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
  const size_t ready = text_.size() - hold;
  if (ready <= sent_) return "";
  std::string out = text_.substr(sent_, ready - sent_);
  sent_ = ready;
  return out;
}

std::string TextOutput::finish() {
  if (stopped_) return "";
  text_ += decoder_.finish();
  std::string out = text_.substr(sent_);
  sent_ = text_.size();
  return out;
}

}  // namespace golinear::serve
