// What an evaluation returns: metric rows (task, metric, value, standard error, n) and one JSON
// sample per document for --log-samples; printed as a table or as JSON.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"

namespace golinear::eval {

struct MetricRow {
  std::string task;    // "piqa", "mmlu_abstract_algebra", "niah_single_1@depth=50", ...
  std::string metric;  // "acc", "acc_norm", "perplexity", "string_match_all", ...
  double value = 0;
  double stderr_value = 0;  // NaN when it is not defined (fewer than 2 samples): "N/A"
  long n = 0;               // documents / samples behind the value
};

struct TaskReport {
  std::string task;
  std::vector<MetricRow> metrics;
  std::vector<Json> samples;  // in data order, each with "index"
  Json config;                // options that shaped the numbers (echoed in --json)
};

// Aligned columns: task, metric, value, stderr, n.
std::string report_table(const TaskReport& report);
// {"task", "config", "metrics": [{"task","metric","value","stderr","n"}]}; stderr null when N/A.
Json report_json(const TaskReport& report);
// One JSON line per sample.
Status report_write_samples(const TaskReport& report, const std::string& path);

}  // namespace golinear::eval
