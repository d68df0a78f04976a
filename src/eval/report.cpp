#include "eval/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/file.h"

namespace golinear::eval {

namespace {

std::string format_number(double value) {
  if (std::isnan(value)) return "N/A";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.4f", value);
  return buffer;
}

}  // namespace

std::string report_table(const TaskReport& report) {
  std::vector<std::vector<std::string>> cells = {{"task", "metric", "value", "stderr", "n"}};
  for (const MetricRow& row : report.metrics)
    cells.push_back({row.task, row.metric, format_number(row.value), format_number(row.stderr_value),
                     std::to_string(row.n)});
  std::vector<size_t> widths(5, 0);
  for (const auto& line : cells)
    for (size_t c = 0; c < line.size(); ++c) widths[c] = std::max(widths[c], line[c].size());
  std::string out;
  for (const auto& line : cells) {
    for (size_t c = 0; c < line.size(); ++c) {
      const bool numeric = c >= 2;
      const std::string pad(widths[c] - line[c].size(), ' ');
      out += numeric ? pad + line[c] : line[c] + pad;
      out += c + 1 < line.size() ? "  " : "\n";
    }
  }
  return out;
}

Json report_json(const TaskReport& report) {
  Json metrics = Json::array();
  for (const MetricRow& row : report.metrics) {
    Json stderr_json = std::isnan(row.stderr_value) ? Json(nullptr) : Json(row.stderr_value);
    metrics.push_back({{"task", row.task}, {"metric", row.metric}, {"value", row.value},
                       {"stderr", stderr_json}, {"n", row.n}});
  }
  return {{"task", report.task}, {"config", report.config}, {"metrics", metrics}};
}

Status report_write_samples(const TaskReport& report, const std::string& path) {
  std::string text;
  for (const Json& sample : report.samples) text += sample.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  return file_write_atomic(path, text);
}

}  // namespace golinear::eval
