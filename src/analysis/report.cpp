#include "analysis/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "analysis/diagnostics.h"
#include "analysis/svg_plot.h"
#include "common/file.h"

namespace golinear::analysis {

namespace {

namespace fs = std::filesystem;

constexpr int kPositionBins = 40;  // log-spaced bins of the lines against position
constexpr int kBuckets = 5;        // quantile buckets of the box plots

const char* const kHardnessDefinition =
    "mean of rank-normalized terms, each in [0, 1] with 1 the hardest layer: low mean key "
    "concentration, high mean projection residual, and (with a student) high layerwise NMSE";

std::string fixed(double v, int digits = 4) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char text[48];
  std::snprintf(text, sizeof text, "%.*f", digits, v);
  return text;
}

std::string general(double v) {
  if (std::isnan(v)) return "nan";
  char text[48];
  std::snprintf(text, sizeof text, "%.6g", v);
  return text;
}

// A CSV field: labels are user text (directory names), numbers are not.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// Values against position (T) as the mean of each of kPositionBins log-spaced bins of t + 1;
// x is the geometric mean of t + 1 over the bin. Empty bins are skipped.
LineSeries log_binned(const std::string& label, const double* values, int T) {
  LineSeries series;
  series.label = label;
  std::vector<double> sum(kPositionBins, 0.0), log_x(kPositionBins, 0.0);
  std::vector<int> count(kPositionBins, 0);
  const double log_T = std::log((double)std::max(2, T));
  for (int t = 0; t < T; ++t) {
    if (!std::isfinite(values[t])) continue;
    const int b = std::min(kPositionBins - 1, (int)(std::log(t + 1.0) / log_T * kPositionBins));
    sum[b] += values[t];
    log_x[b] += std::log(t + 1.0);
    ++count[b];
  }
  for (int b = 0; b < kPositionBins; ++b)
    if (count[b] > 0) {
      series.x.push_back(std::exp(log_x[b] / count[b]));
      series.y.push_back(sum[b] / count[b]);
    }
  return series;
}

// A student's tokenwise NMSE (T): per position, the mean over its linearized layers of the
// layer's NMSE at that position (layers weigh equally, whatever the scale of their outputs).
std::vector<double> mean_position_nmse(const AnalysisResult& r, const StudentResult& s) {
  std::vector<double> out(r.T, 0.0);
  int layers = 0;
  for (int l = 0; l < r.L; ++l) {
    if (!s.linearized(l)) continue;
    ++layers;
    for (int t = 0; t < r.T; ++t) out[t] += s.position_nmse[(long)l * r.T + t];
  }
  for (double& v : out) v = layers ? v / layers : std::nan("");
  return out;
}

// Mean over the linearized layers of each layer's NMSE restricted to positions [begin, end).
double band_nmse(const AnalysisResult& r, const StudentResult& s, PositionBand band) {
  double total = 0;
  int layers = 0;
  for (int l = 0; l < r.L; ++l) {
    if (!s.linearized(l)) continue;
    double sum = 0;
    for (int t = band.begin; t < band.end; ++t) sum += s.position_nmse[(long)l * r.T + t];
    total += sum / (band.end - band.begin);
    ++layers;
  }
  return layers ? total / layers : std::nan("");
}

// Mean over linearized layers of the layerwise NMSE.
double mean_layer_nmse(const AnalysisResult& r, const StudentResult& s) {
  double total = 0;
  int layers = 0;
  for (int l = 0; l < r.L; ++l)
    if (s.linearized(l)) total += s.layer_nmse[l], ++layers;
  return layers ? total / layers : std::nan("");
}

struct Buckets {
  std::vector<double> edges;        // kBuckets + 1 quantile edges
  std::vector<std::string> labels;  // "[lo, hi)"
  int of(double v) const {
    const auto it = std::upper_bound(edges.begin() + 1, edges.end() - 1, v);
    return (int)(it - (edges.begin() + 1));
  }
};

// Quantile buckets of a diagnostic over the (layer, kv head, position) points of every layer.
Buckets quantile_buckets(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  Buckets b;
  for (int i = 0; i <= kBuckets; ++i) {
    const size_t k = std::min(values.size() - 1, (size_t)((double)i / kBuckets * (values.size() - 1)));
    b.edges.push_back(values[k]);
  }
  for (int i = 0; i < kBuckets; ++i)
    b.labels.push_back("[" + fixed(b.edges[i], 3) + ", " + fixed(b.edges[i + 1], 3) +
                       (i + 1 == kBuckets ? "]" : ")"));
  return b;
}

BoxPlot nmse_box_plot(const AnalysisResult& r, const std::vector<double>& diagnostic,
                      const std::string& name) {
  const Buckets buckets = quantile_buckets(diagnostic);
  BoxPlot plot;
  plot.title = "Token NMSE by " + name + " quintile";
  plot.x_label = name + " of the (layer, kv head, position) point, quintiles";
  plot.y = {"NMSE (log)", true};
  plot.categories = buckets.labels;
  for (const StudentResult& s : r.students) {
    std::vector<std::vector<double>> samples(kBuckets);
    for (int l = 0; l < r.L; ++l) {
      if (!s.linearized(l)) continue;
      for (long i = (long)l * r.G * r.T; i < (long)(l + 1) * r.G * r.T; ++i)
        samples[buckets.of(diagnostic[i])].push_back(s.point_nmse[i]);
    }
    BoxSeries series{s.label, {}};
    for (auto& bucket : samples) series.boxes.push_back(box_stats(std::move(bucket)));
    plot.series.push_back(std::move(series));
  }
  return plot;
}

std::vector<std::string> layer_names(int L) {
  std::vector<std::string> names;
  for (int l = 0; l < L; ++l) names.push_back(std::to_string(l));
  return names;
}

std::string layers_csv(const AnalysisResult& r) {
  std::ostringstream out;
  const std::vector<int> rank = hardness_ranking(r.hardness);
  out << "layer,concentration,residual,sink_mass,far_mass,hardness_teacher,rank_teacher";
  for (const StudentResult& s : r.students)
    out << "," << csv_field("kind_" + s.label) << "," << csv_field("nmse_" + s.label) << ","
        << csv_field("hardness_" + s.label);
  out << "\n";
  for (int l = 0; l < r.L; ++l) {
    const int position = (int)(std::find(rank.begin(), rank.end(), l) - rank.begin());
    out << l << "," << general(r.concentration[l]) << "," << general(r.residual[l]) << ","
        << (r.attention_mass ? general(r.sink_mass[l]) : "") << ","
        << (r.attention_mass ? general(r.far_mass[l]) : "") << "," << general(r.hardness[l])
        << "," << position + 1;
    for (const StudentResult& s : r.students)
      out << "," << s.layer_kinds[l] << "," << general(s.layer_nmse[l]) << ","
          << general(s.hardness[l]);
    out << "\n";
  }
  return out.str();
}

std::string heads_csv(const AnalysisResult& r) {
  std::ostringstream out;
  out << "layer,head,kv_head,concentration,residual,sink_mass,far_mass";
  for (const StudentResult& s : r.students) out << "," << csv_field("nmse_" + s.label);
  out << "\n";
  for (int l = 0; l < r.L; ++l)
    for (int h = 0; h < r.H; ++h) {
      const int g = h / (r.H / r.G);
      out << l << "," << h << "," << g << "," << general(r.head_concentration[(long)l * r.G + g])
          << "," << general(r.head_residual[(long)l * r.G + g]) << ","
          << (r.attention_mass ? general(r.head_sink_mass[(long)l * r.H + h]) : "") << ","
          << (r.attention_mass ? general(r.head_far_mass[(long)l * r.H + h]) : "");
      for (const StudentResult& s : r.students) out << "," << general(s.head_nmse[(long)l * r.H + h]);
      out << "\n";
    }
  return out.str();
}

std::string positions_csv(const AnalysisResult& r) {
  std::ostringstream out;
  out << "layer,position,concentration,residual,sink_mass,far_mass";
  for (const StudentResult& s : r.students) out << "," << csv_field("nmse_" + s.label);
  out << "\n";
  for (int l = 0; l < r.L; ++l)
    for (int t = 0; t < r.T; ++t) {
      const long i = (long)l * r.T + t;
      out << l << "," << t << "," << general(r.position_concentration[i]) << ","
          << general(r.position_residual[i]) << ","
          << (r.attention_mass ? general(r.position_sink_mass[i]) : "") << ","
          << (r.attention_mass ? general(r.position_far_mass[i]) : "");
      for (const StudentResult& s : r.students) out << "," << general(s.position_nmse[i]);
      out << "\n";
    }
  return out.str();
}

// (file name, SVG text, caption) of every plot.
struct Figure {
  std::string file, svg, caption;
};

std::vector<Figure> figures_of(const AnalysisResult& r) {
  std::vector<Figure> figures;
  if (!r.students.empty()) {
    LinePlot plot;
    plot.title = "Tokenwise NMSE against position";
    plot.x = {"position t + 1 (log)", true};
    plot.y = {"NMSE, mean over linearized layers (log)", true};
    for (const StudentResult& s : r.students) {
      const std::vector<double> nmse = mean_position_nmse(r, s);
      plot.series.push_back(log_binned(s.label, nmse.data(), r.T));
    }
    figures.push_back({"nmse_vs_position.svg", svg_line_plot(plot),
                       "Tokenwise NMSE of each student against the teacher, by position (mean of "
                       "the per-layer NMSE over the linearized layers, averaged in log-spaced "
                       "position bins)."});
    figures.push_back({"nmse_by_concentration.svg",
                       svg_box_plot(nmse_box_plot(r, r.point_concentration, "key concentration")),
                       "NMSE of the (layer, kv head, position) points of the linearized layers, "
                       "by quintile of the teacher's key concentration at that point. Boxes: "
                       "quartiles and median; whiskers: 5th and 95th percentiles."});
    figures.push_back({"nmse_by_residual.svg",
                       svg_box_plot(nmse_box_plot(r, r.point_residual, "projection residual")),
                       "The same points by quintile of the projection residual."});
    BarPlot bars;
    bars.title = "Layerwise NMSE";
    bars.x_label = "layer";
    bars.y = {"NMSE"};
    bars.categories = layer_names(r.L);
    for (const StudentResult& s : r.students) bars.series.push_back({s.label, s.layer_nmse});
    figures.push_back({"nmse_by_layer.svg", svg_bar_plot(bars),
                       "NMSE of each layer's student mixer on the teacher's inputs (0 for layers "
                       "kept as softmax)."});
  }
  for (const auto& [name, values, file] :
       {std::tuple{"key concentration", &r.position_concentration, "concentration_vs_position.svg"},
        std::tuple{"projection residual", &r.position_residual, "residual_vs_position.svg"}}) {
    LinePlot plot;
    plot.title = std::string("Teacher ") + name + " against position";
    plot.x = {"position t + 1 (log)", true};
    plot.y = {std::string(name) + ", mean over sequences and kv heads"};
    for (int l = 0; l < r.L; ++l)
      plot.series.push_back(log_binned("layer " + std::to_string(l), values->data() + (long)l * r.T, r.T));
    figures.push_back({file, svg_line_plot(plot),
                       std::string("The teacher's ") + name + " of the unit keys per layer, by "
                       "position (log-spaced position bins)."});
  }
  if (r.attention_mass) {
    BarPlot bars;
    bars.title = "Teacher attention mass on sinks and on the far past";
    bars.x_label = "layer";
    bars.y = {"attention probability, mean over queries"};
    bars.categories = layer_names(r.L);
    bars.series.push_back({str_cat("sinks (j < ", r.sinks, ")"), r.sink_mass});
    bars.series.push_back({str_cat("far (", r.sinks, " <= j <= t - ", r.window, ")"), r.far_mass});
    figures.push_back({"attention_mass.svg", svg_bar_plot(bars),
                       "Sink mass: the teacher's attention probability on the first s tokens; far "
                       "mass: on the tokens outside the hybrid's exact keys (sinks and window), "
                       "what its linear branch has to carry."});
  }
  BarPlot bars;
  bars.title = "Layer hardness";
  bars.x_label = "layer";
  bars.y = {"hardness (1 = hardest)"};
  bars.categories = layer_names(r.L);
  bars.series.push_back({"teacher only", r.hardness});
  for (const StudentResult& s : r.students) bars.series.push_back({"with " + s.label, s.hardness});
  figures.push_back({"hardness.svg", svg_bar_plot(bars),
                     std::string("Hardness per layer: ") + kHardnessDefinition + "."});
  return figures;
}

std::string report_markdown(const AnalysisResult& r, const Json& settings,
                            const std::vector<Figure>& figures) {
  std::ostringstream md;
  md << "# golinear analyze\n\n";
  md << "Teacher `" << settings.value("model", std::string("?")) << "`, data `"
     << settings.value("data", std::string("?")) << "`: " << r.sequences << " sequences of "
     << r.T << " tokens; " << r.L << " layers, " << r.H << " query heads, " << r.G
     << " kv heads, head dim " << r.D << "; sinks s = " << r.sinks << ", window w = " << r.window
     << ".\n\n";
  md << "Definitions (DESIGN.md §5): key concentration c_t = ‖mean of the unit keys up to t‖; "
        "projection residual r_t = ‖(k̂_t − k̄_t) − (I − Π_k̄)k̂_t‖ / ‖k̂_t − k̄_t‖ (the share of the "
        "key's deviation from the running mean that lies along the mean direction); unit keys of "
        "the teacher's k_proj output before RoPE, per kv head. Hardness: "
     << kHardnessDefinition << ".\n\n";

  md << "## Layers\n\n| layer | concentration | residual | sink mass | far mass | hardness (teacher) |";
  for (const StudentResult& s : r.students) {
    md << " NMSE " << s.label << " |";
    if (!s.layer_sensitivity.empty()) md << " sensitivity " << s.label << " |";
  }
  md << "\n|---|---|---|---|---|---|";
  for (const StudentResult& s : r.students) md << (s.layer_sensitivity.empty() ? "---|" : "---|---|");
  md << "\n";
  for (int l = 0; l < r.L; ++l) {
    md << "| " << l << " | " << fixed(r.concentration[l]) << " | " << fixed(r.residual[l]) << " | "
       << (r.attention_mass ? fixed(r.sink_mass[l]) : "–") << " | "
       << (r.attention_mass ? fixed(r.far_mass[l]) : "–") << " | " << fixed(r.hardness[l], 3) << " |";
    for (const StudentResult& s : r.students) {
      md << " " << (s.linearized(l) ? fixed(s.layer_nmse[l]) : "softmax") << " |";
      if (!s.layer_sensitivity.empty())
        md << " " << (s.linearized(l) ? fixed(s.layer_sensitivity[l]) : "softmax") << " |";
    }
    md << "\n";
  }
  if (std::any_of(r.students.begin(), r.students.end(),
                  [](const StudentResult& s) { return !s.layer_sensitivity.empty(); }))
    md << "\nSensitivity (leave-one-layer-linearized): the teacher's perplexity on these sequences "
          "with only that layer's mixer the student's (LoRA adapters not applied), relative to "
          "the teacher's, minus 1.\n";
  md << "\nHardest layers first (teacher only): ";
  for (int l : hardness_ranking(r.hardness)) md << l << " ";
  md << "\n";
  for (const StudentResult& s : r.students) {
    md << "\n## Student " << s.label << "\n\n`" << s.dir << "`. Hardest layers first with its NMSE: ";
    for (int l : hardness_ranking(s.hardness)) md << l << " ";
    if (!s.layer_sensitivity.empty())
      md << "\n\nPerplexity on these sequences: teacher " << fixed(s.teacher_ppl, 3) << ", student "
         << fixed(s.student_ppl, 3) << " (all its layers, LoRA adapters not applied).";
    md << "\n\nMean NMSE over linearized layers: " << fixed(mean_layer_nmse(r, s)) << ". By position:\n\n"
       << "| positions | NMSE |\n|---|---|\n";
    for (PositionBand band : position_bands(r.T))
      md << "| " << band.begin << "–" << band.end - 1 << " | " << fixed(band_nmse(r, s, band)) << " |\n";
    md << "\nSpearman rank correlation with the NMSE:\n\n| diagnostic | level | n | rho |\n|---|---|---|---|\n";
    for (const Correlation& c : s.correlations)
      md << "| " << c.diagnostic << " | " << c.level << " | " << c.n << " | " << fixed(c.rho, 3) << " |\n";
  }
  md << "\n## Plots\n";
  for (const Figure& f : figures) md << "\n![" << f.file << "](" << f.file << ")\n\n" << f.caption << "\n";
  md << "\nEvery number is also in summary.json, layers.csv, heads.csv and positions.csv.\n";
  return md.str();
}

Json correlations_json(const std::vector<Correlation>& correlations) {
  Json out = Json::array();
  for (const Correlation& c : correlations)
    out.push_back({{"diagnostic", c.diagnostic}, {"level", c.level}, {"n", c.n},
                   {"rho", std::isnan(c.rho) ? Json() : Json(c.rho)}});
  return out;
}

}  // namespace

std::vector<PositionBand> position_bands(int T) {
  std::vector<PositionBand> bands;
  for (int begin = 0, end = 64; begin < T; begin = end, end *= 4)
    bands.push_back({begin, std::min(end, T)});
  return bands;
}

Json analysis_summary_json(const AnalysisResult& r, const Json& settings) {
  auto number = [](double v) { return std::isfinite(v) ? Json(v) : Json(); };
  const std::vector<int> ranking = hardness_ranking(r.hardness);
  Json layers = Json::array();
  for (int l = 0; l < r.L; ++l) {
    Json layer = {{"layer", l},
                  {"concentration", number(r.concentration[l])},
                  {"residual", number(r.residual[l])},
                  {"sink_mass", r.attention_mass ? number(r.sink_mass[l]) : Json()},
                  {"far_mass", r.attention_mass ? number(r.far_mass[l]) : Json()},
                  {"hardness", number(r.hardness[l])},
                  {"rank", (int)(std::find(ranking.begin(), ranking.end(), l) - ranking.begin()) + 1}};
    Json per_head = Json::array();
    for (int g = 0; g < r.G; ++g)
      per_head.push_back({{"kv_head", g},
                          {"concentration", number(r.head_concentration[(long)l * r.G + g])},
                          {"residual", number(r.head_residual[(long)l * r.G + g])}});
    layer["kv_heads"] = per_head;
    Json students = Json::object();
    for (const StudentResult& s : r.students)
    {
      students[s.label] = {{"kind", s.layer_kinds[l]},
                           {"nmse", number(s.layer_nmse[l])},
                           {"hardness", number(s.hardness[l])}};
      if (!s.layer_sensitivity.empty())
        students[s.label]["sensitivity"] = number(s.layer_sensitivity[l]);
    }
    if (!r.students.empty()) layer["students"] = students;
    layers.push_back(layer);
  }
  Json students = Json::array();
  for (const StudentResult& s : r.students) {
    Json bands = Json::array();
    for (PositionBand band : position_bands(r.T))
      bands.push_back({{"begin", band.begin}, {"end", band.end}, {"nmse", number(band_nmse(r, s, band))}});
    std::vector<Json> layer_nmse;
    for (double v : s.layer_nmse) layer_nmse.push_back(number(v));
    Json student = {{"label", s.label},
                    {"dir", s.dir},
                    {"layer_kinds", s.layer_kinds},
                    {"nmse", number(mean_layer_nmse(r, s))},
                    {"layer_nmse", layer_nmse},
                    {"position_band_nmse", bands},
                    {"ranking", hardness_ranking(s.hardness)},
                    {"correlations", correlations_json(s.correlations)}};
    if (!s.layer_sensitivity.empty()) {
      std::vector<Json> sensitivity;
      for (double v : s.layer_sensitivity) sensitivity.push_back(number(v));
      student["layer_sensitivity"] = sensitivity;
      student["teacher_ppl"] = number(s.teacher_ppl);
      student["student_ppl"] = number(s.student_ppl);
    }
    students.push_back(student);
  }
  return {{"format", "golinear.analysis"},
          {"version", 1},
          {"settings", settings},
          {"shape", {{"layers", r.L}, {"heads", r.H}, {"kv_heads", r.G}, {"head_dim", r.D}}},
          {"sequences", r.sequences},
          {"seq_len", r.T},
          {"sinks", r.sinks},
          {"window", r.window},
          {"keys", "unit keys k/sqrt(|k|^2 + 1e-6) of the teacher's k_proj output before RoPE, per kv head"},
          {"hardness_definition", kHardnessDefinition},
          {"layers", layers},
          {"ranking", ranking},
          {"students", students}};
}

Status analysis_write_report(const AnalysisResult& result, const Json& settings,
                             const std::string& out_dir) {
  const std::string partial = out_dir + ".partial";
  if (fs::exists(out_dir)) return make_error(out_dir, ": already exists; choose another --out");
  if (fs::exists(partial))
    return make_error(partial, ": left by an interrupted run; delete it first");
  std::error_code ec;
  fs::create_directories(partial, ec);
  if (ec) return make_error(partial, ": cannot create the directory (", ec.message(), ")");

  const std::vector<Figure> figures = figures_of(result);
  std::vector<std::pair<std::string, std::string>> files = {
      {"summary.json", analysis_summary_json(result, settings).dump(2) + "\n"},
      {"layers.csv", layers_csv(result)},
      {"heads.csv", heads_csv(result)},
      {"positions.csv", positions_csv(result)},
      {"report.md", report_markdown(result, settings, figures)}};
  for (const Figure& f : figures) files.push_back({f.file, f.svg});
  for (const auto& [name, bytes] : files) GL_TRY(file_write_atomic(partial + "/" + name, bytes));
  fs::rename(partial, out_dir, ec);
  if (ec) return make_error(out_dir, ": cannot move the finished analysis into place (", ec.message(), ")");
  return ok_status();
}

}  // namespace golinear::analysis
