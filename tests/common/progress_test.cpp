// The progress bar on a terminal (redrawn in place) and in a log (a line every few percent).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "common/progress.h"

namespace {

// Everything written to `stream` since it was opened.
std::string stream_text(std::FILE* stream) {
  std::fflush(stream);
  std::rewind(stream);
  std::string text;
  char chunk[4096];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, stream)) > 0) text.append(chunk, n);
  return text;
}

long count(const std::string& text, char c) { return (long)std::count(text.begin(), text.end(), c); }

TEST(ProgressBar, WithoutATerminalLogsALineEveryFivePercent) {
  std::FILE* log = std::tmpfile();
  ASSERT_NE(log, nullptr);
  {
    golinear::ProgressBar bar("train", 1000, "tok",
                              {.stream = log, .terminal = false, .log_every_percent = 5.0,
                               .log_every_seconds = 1e9});
    for (long step = 1; step <= 1000; ++step) bar.update(step, step * 10.0, "loss 1.0");
    bar.finish();
  }
  const std::string text = stream_text(log);
  std::fclose(log);
  // Buckets 0%, 5%, ..., 95% once each, then the last line: 21 lines, no carriage return.
  EXPECT_EQ(count(text, '\n'), 21) << text;
  EXPECT_EQ(count(text, '\r'), 0);
  EXPECT_NE(text.find("train [=>"), std::string::npos) << text;
  EXPECT_NE(text.find("50/1000"), std::string::npos) << text;  // the first line of the 5% bucket
  EXPECT_EQ(text.find("51/1000"), std::string::npos) << text;
  const std::string last = text.substr(text.rfind('\n', text.size() - 2) + 1);
  EXPECT_NE(last.find("1000/1000 100.0%"), std::string::npos) << last;
  EXPECT_NE(last.find("took"), std::string::npos) << last;
}

TEST(ProgressBar, WithoutATerminalAQuietSpellGetsALine) {
  std::FILE* log = std::tmpfile();
  ASSERT_NE(log, nullptr);
  {
    // Every update is "too long" after the last line: each writes one.
    golinear::ProgressBar bar("slow", 1000, "tok",
                              {.stream = log, .terminal = false, .log_every_percent = 50.0,
                               .log_every_seconds = 0.0});
    for (long step = 1; step <= 10; ++step) bar.update(step, step);
  }
  const std::string text = stream_text(log);
  std::fclose(log);
  EXPECT_EQ(count(text, '\n'), 10) << text;
}

TEST(ProgressBar, OnATerminalRedrawsInPlace) {
  std::FILE* log = std::tmpfile();
  ASSERT_NE(log, nullptr);
  {
    golinear::ProgressBar bar("train", 1000, "tok", {.stream = log, .terminal = true});
    for (long step = 1; step <= 1000; ++step) bar.update(step, step);
    const std::string before_finish = stream_text(log);
    EXPECT_EQ(count(before_finish, '\n'), 0);           // one line, redrawn
    EXPECT_GE(count(before_finish, '\r'), 2);           // the first draw and the last
    EXPECT_LT(count(before_finish, '\r'), 1000);        // at most every 200 ms, not every update
    EXPECT_NE(before_finish.find("\033[K"), std::string::npos);
    std::fseek(log, 0, SEEK_END);
    bar.finish();
  }
  const std::string text = stream_text(log);
  std::fclose(log);
  EXPECT_EQ(count(text, '\n'), 1);
  EXPECT_NE(text.find("1000/1000"), std::string::npos);
}

}  // namespace
