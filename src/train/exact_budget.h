// Per-layer exact budgets at a fixed total (issue 14): the layers where the linear state
// represents the teacher worst get more window, the others less, the sum unchanged, so the decode
// memory stays that of the uniform recipe. The signal is measured: the per-layer NMSE of a short
// uniform attention transfer (a probe run's linearization.json), the teacher's hardness
// (analysis::teacher_layer_hardness), or a student's leave-one-layer-linearized perplexity cost
// (an analysis's summary.json).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/result.h"

namespace golinear::train {

// Windows w_l ∝ signal_l over the layers with signal_l ≥ 0 (the others, e.g. kept as softmax,
// get `window` and are not counted), with Σ w_l = n·window over those n layers, every w_l a
// multiple of `quantum` and ≥ min_window: proportional shares floored to the quantum, then the
// remaining quanta to the largest remainders (lower layer first on ties). Refuses a total that
// cannot give every layer min_window, and a signal that is all zero.
Result<std::vector<int>> allocate_windows(const std::vector<double>& signal, int window,
                                          int quantum = 8, int min_window = 8);

// The per-layer signal named by `source`: "hardness" is not read here (the caller computes it);
// any other value is a linearized directory whose linearization.json holds
// training.transfer.layer_nmse (a probe run of the uniform recipe).
Result<std::vector<double>> probe_layer_nmse(const std::string& dir, int num_layers);

// Whether a --window-by source names an analysis summary (a .json file) rather than a directory.
inline bool is_analysis_summary(const std::string& source) {
  return source.size() > 5 && source.compare(source.size() - 5, 5, ".json") == 0;
}

// The per-layer leave-one-layer-linearized sensitivity of the first student of an analysis
// (`golinear analyze --student DIR --sensitivity`'s summary.json, analysis/analyze.h): negative
// values (noise around no cost) as 0; a layer that student kept as softmax as −1 (not counted).
Result<std::vector<double>> analysis_layer_sensitivity(const std::string& summary_json,
                                                       int num_layers);

// A layer's leave-one-layer-linearized cost as an allocation signal: noise below no cost as 0,
// a layer kept softmax (NaN) as −1 (not counted).
inline double sensitivity_signal(double cost) {
  return std::isnan(cost) ? -1.0 : std::max(0.0, cost);
}

}  // namespace golinear::train
