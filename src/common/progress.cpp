#include "common/progress.h"

#include <unistd.h>

#include <cmath>

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

ProgressBar::ProgressBar(std::string label, long total, std::string unit, ProgressOptions options)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), options_(options),
      terminal_(options.terminal.value_or(::isatty(::fileno(options.stream)) != 0)),
      start_(std::chrono::steady_clock::now()), last_(start_ - std::chrono::hours(1)) {}

void ProgressBar::update(long done, double units, const std::string& extra) {
  auto now = std::chrono::steady_clock::now();
  const bool last = done >= total_;
  if (terminal_) {
    if (!last && now - last_ < std::chrono::milliseconds(200)) return;
  } else {
    // The share bucket of `done` (every log_every_percent of the total); a line when it moves on
    // or when log_every_seconds passed without one.
    const double share = total_ > 0 ? 100.0 * (double)done / (double)total_ : 100.0;
    const long bucket = (long)std::floor(share / options_.log_every_percent);
    const bool quiet_too_long =
        std::chrono::duration<double>(now - last_).count() >= options_.log_every_seconds;
    if (!last && bucket == last_bucket_ && !quiet_too_long) return;
    last_bucket_ = bucket;
  }
  last_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? units / elapsed : 0;
  const double eta = done > 0 ? elapsed * (total_ - done) / done : 0;
  const int width = 24, filled = total_ > 0 ? (int)(width * done / total_) : width;
  std::string bar(filled, '=');
  if (filled < width) bar += '>' + std::string(width - filled - 1, ' ');
  std::fprintf(options_.stream, "%s%s [%s] %ld/%ld %5.1f%% · %.0f %s/s%s%s · %s %s%s",
               terminal_ ? "\r" : "", label_.c_str(), bar.c_str(), done, total_,
               total_ ? 100.0 * done / total_ : 100.0, rate, unit_.c_str(),
               extra.empty() ? "" : " · ", extra.c_str(), last ? "took" : "ETA",
               format_duration(last ? elapsed : eta).c_str(), terminal_ ? "\033[K" : "\n");
  std::fflush(options_.stream);
}

void ProgressBar::finish() {
  if (terminal_) std::fputc('\n', options_.stream);
}

}  // namespace golinear
