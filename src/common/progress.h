// A progress bar on stderr: "label [=====>    ] 123/1000 12.3% · 456 tok/s · loss 0.123 · ETA 1m02s".
// Redrawn at most every 200 ms; a plain line per update when stderr is not a terminal (logs).
#pragma once

#include <chrono>
#include <string>

namespace golinear {

class ProgressBar {
 public:
  ProgressBar(std::string label, long total, std::string unit = "tok");
  // `done` steps of `total`; `units` processed so far (for the rate); `extra` shown after it.
  void update(long done, double units, const std::string& extra = "");
  void finish();

 private:
  std::string label_, unit_;
  long total_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_;
  long last_logged_ = -1;
};

}  // namespace golinear
