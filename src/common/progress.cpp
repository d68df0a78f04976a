#include "common/progress.h"

#include <unistd.h>

#include <cstdio>

namespace golinear {

namespace {

std::string format_duration(double seconds) {
  long s = (long)(seconds + 0.5);
  char text[32];
  if (s >= 3600) std::snprintf(text, sizeof text, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else std::snprintf(text, sizeof text, "%ldm%02lds", s / 60, s % 60);
  return text;
}

}  // namespace

ProgressBar::ProgressBar(std::string label, long total, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), tty_(::isatty(2)),
      start_(std::chrono::steady_clock::now()), last_(start_ - std::chrono::seconds(1)) {}

void ProgressBar::update(long done, double units, const std::string& extra) {
  auto now = std::chrono::steady_clock::now();
  const bool last = done >= total_;
  if (!last && now - last_ < std::chrono::milliseconds(200)) return;
  // Without a terminal, log about every 5% so CI logs stay short.
  if (!tty_ && !last && total_ > 20 && done / (total_ / 20) == last_logged_) return;
  last_ = now;
  last_logged_ = total_ > 20 ? done / (total_ / 20) : done;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? units / elapsed : 0;
  const double eta = done > 0 ? elapsed * (total_ - done) / done : 0;
  const int width = 24, filled = total_ > 0 ? (int)(width * done / total_) : width;
  std::string bar(filled, '=');
  if (filled < width) bar += '>' + std::string(width - filled - 1, ' ');
  std::fprintf(stderr, "%s%s [%s] %ld/%ld %5.1f%% · %.0f %s/s%s%s · %s %s%s", tty_ ? "\r" : "",
               label_.c_str(), bar.c_str(), done, total_, total_ ? 100.0 * done / total_ : 100.0,
               rate, unit_.c_str(), extra.empty() ? "" : " · ", extra.c_str(),
               last ? "took" : "ETA", format_duration(last ? elapsed : eta).c_str(),
               tty_ ? "\033[K" : "\n");
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (tty_) std::fputc('\n', stderr);
}

}  // namespace golinear
