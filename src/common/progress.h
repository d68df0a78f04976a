// A progress bar: "label [=====>    ] 123/1000 12.3% · 456 tok/s · loss 0.123 · ETA 1m02s".
// On a terminal it is redrawn in place at most every 200 ms. Elsewhere (a log file, CI) it writes
// one plain line each time another `log_every_percent` of the total is done, or when
// `log_every_seconds` have passed since the last line (a slow run still shows it is alive), and
// a last line at the end: a log stays a few dozen lines whatever the number of updates.
#pragma once

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

namespace golinear {

struct ProgressOptions {
  std::FILE* stream = stderr;
  std::optional<bool> terminal;    // redraw in place; unset: whether `stream` is a terminal
  double log_every_percent = 5.0;  // without a terminal: a line per this share of the total...
  double log_every_seconds = 60.0; // ...or after this long without one
};

class ProgressBar {
 public:
  ProgressBar(std::string label, long total, std::string unit = "tok", ProgressOptions options = {});
  // `done` steps of `total`; `units` processed so far (for the rate); `extra` shown after it.
  void update(long done, double units, const std::string& extra = "");
  void finish();

 private:
  std::string label_, unit_;
  long total_;
  ProgressOptions options_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_, last_;
  long last_bucket_ = -1;  // without a terminal: the share bucket of the last line
};

}  // namespace golinear
