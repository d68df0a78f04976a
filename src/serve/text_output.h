// The text a client receives for one request's generated tokens: decoded incrementally (a
// token that ends inside a UTF-8 character waits for the rest), special tokens skipped, cut
// before the first occurrence of any stop string (which is not returned, as OpenAI does), and a
// tail that could still become a stop string held back, so streamed text is never taken back.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace golinear::serve {

class TextOutput {
 public:
  // `tokenizer` must outlive this; empty stop strings are ignored.
  TextOutput(const Tokenizer& tokenizer, std::vector<std::string> stop);
  // Adds one generated token; returns the text that may be sent now (often empty).
  std::string push(int32_t id);
  // True once a stop string has matched: the request ends, nothing more is sent.
  bool stopped() const { return stopped_; }
  // The end of generation: the held-back text (empty after a stop string).
  std::string finish();
  const std::string& text() const { return text_; }  // everything decoded so far, up to the stop

 private:
  std::string release();  // what can be sent of text_ now
  TokenStreamDecoder decoder_;
  std::vector<std::string> stop_;
  size_t longest_stop_ = 0;  // the longest of stop_
  std::string text_;
  size_t sent_ = 0;
  bool stopped_ = false;
};

}  // namespace golinear::serve
