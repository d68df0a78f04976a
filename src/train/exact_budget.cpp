#include "train/exact_budget.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace golinear::train {

Result<std::vector<int>> allocate_windows(const std::vector<double>& signal, int window,
                                          int quantum, int min_window) {
  if (quantum <= 0 || min_window < 0 || window < 0)
    return make_error("window allocation: quantum, minimum and window must be positive");
  std::vector<int> layers;
  double sum = 0;
  for (int l = 0; l < (int)signal.size(); ++l)
    if (signal[l] >= 0) layers.push_back(l), sum += signal[l];
  std::vector<int> out(signal.size(), window);
  if (layers.empty()) return out;
  const long n = (long)layers.size(), total = n * window;
  const long floor_quanta = (min_window + quantum - 1) / quantum;  // each layer's minimum
  const long quanta = total / quantum;                             // what the total buys
  if (floor_quanta * n > quanta)
    return make_error("window allocation: ", n, " layers × at least ", floor_quanta * quantum,
                      " keys exceed the total of ", total);
  if (!(sum > 0) || !std::isfinite(sum))
    return make_error("window allocation: the per-layer signal is zero or not finite");
  // Quanta above the minimum, shared in proportion to the signal (largest remainder).
  const long spare = quanta - floor_quanta * n;
  std::vector<long> q(n);
  std::vector<double> rest(n);
  long given = 0;
  for (long i = 0; i < n; ++i) {
    const double share = spare * signal[layers[i]] / sum;
    q[i] = (long)std::floor(share);
    rest[i] = share - q[i];
    given += q[i];
  }
  std::vector<long> order(n);
  std::iota(order.begin(), order.end(), 0L);
  std::stable_sort(order.begin(), order.end(), [&](long a, long b) { return rest[a] > rest[b]; });
  for (long i = 0; given < spare; ++i, ++given) ++q[order[i % n]];
  for (long i = 0; i < n; ++i) out[layers[i]] = (int)((floor_quanta + q[i]) * quantum);
  // What the quantum could not place (total not a multiple of it) goes to the largest share.
  const long placed = std::accumulate(layers.begin(), layers.end(), 0L,
                                      [&](long acc, int l) { return acc + out[l]; });
  out[layers[std::max_element(q.begin(), q.end()) - q.begin()]] += (int)(total - placed);
  return out;
}

Result<std::vector<double>> probe_layer_nmse(const std::string& dir, int num_layers) {
  const std::string path = dir + "/linearization.json";
  GL_ASSIGN_OR_RETURN(Json json, json_read_file(path));
  if (!json.contains("training") || !json["training"].contains("transfer") ||
      !json["training"]["transfer"].contains("layer_nmse"))
    return make_error(path, ": no training.transfer.layer_nmse (not an attention-transfer run)");
  GL_ASSIGN_OR_RETURN(std::vector<double> nmse,
                      json_get<std::vector<double>>(json["training"]["transfer"], "layer_nmse", path));
  if ((int)nmse.size() != num_layers)
    return make_error(path, ": layer_nmse lists ", nmse.size(), " layers, the model has ", num_layers);
  return nmse;
}

Result<std::vector<double>> analysis_layer_sensitivity(const std::string& path, int num_layers) {
  GL_ASSIGN_OR_RETURN(Json json, json_read_file(path));
  if (!json.is_object() || json.value("format", "") != "golinear.analysis")
    return make_error(path, ": not a golinear analysis summary (golinear analyze's summary.json)");
  if (!json.contains("students") || !json["students"].is_array() || json["students"].empty() ||
      !json["students"][0].is_object() || !json["students"][0].contains("layer_sensitivity"))
    return make_error(path, ": no students[0].layer_sensitivity (run golinear analyze with --student DIR --sensitivity)");
  const Json& values = json["students"][0]["layer_sensitivity"];
  if (!values.is_array() || (int)values.size() != num_layers)
    return make_error(path, ": layer_sensitivity must list ", num_layers, " layers");
  std::vector<double> signal(num_layers);
  for (int l = 0; l < num_layers; ++l) {
    if (values[l].is_null()) signal[l] = -1.0;  // kept as softmax by that student
    else if (values[l].is_number() && std::isfinite(values[l].get<double>())) signal[l] = sensitivity_signal(values[l].get<double>());
    else return make_error(path, ": layer_sensitivity[", l, "] is not a number");
  }
  return signal;
}

}  // namespace golinear::train
