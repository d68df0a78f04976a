// The files of `golinear analyze --out DIR`:
//   summary.json                 settings, per-layer diagnostics, hardness and ranking, per-student
//                                NMSE (per layer and per position band) and rank correlations;
//   layers.csv                   one row per layer;
//   heads.csv                    one row per (layer, query head), its kv head's key diagnostics;
//   positions.csv                one row per (layer, position);
//   nmse_vs_position.svg         tokenwise NMSE against position, one line per student (log-log);
//   nmse_by_concentration.svg,   box plots of the (layer, kv head, position) NMSE in quintiles of
//   nmse_by_residual.svg         key concentration / projection residual;
//   nmse_by_layer.svg            layerwise NMSE bars per student;
//   concentration_vs_position.svg, residual_vs_position.svg   one line per layer (log-x);
//   attention_mass.svg           sink mass and far mass per layer;
//   hardness.svg                 hardness per layer (teacher only, and with each student's NMSE);
//   report.md                    a short report embedding the plots.
// The NMSE plots exist only with a student. Lines against position are averaged in log-spaced
// position bins so that they read at a glance; the CSV files hold every position.
#pragma once

#include <string>

#include "analysis/analyze.h"
#include "common/json.h"

namespace golinear::analysis {

// Writes every file into `out_dir` atomically: into `out_dir`.partial, renamed to `out_dir` once
// complete. Refuses when `out_dir` or `out_dir`.partial exists. `settings` (model, data, token
// budget...) is recorded in summary.json and report.md.
Status analysis_write_report(const AnalysisResult& result, const Json& settings,
                             const std::string& out_dir);

// The summary.json document alone.
Json analysis_summary_json(const AnalysisResult& result, const Json& settings);

// Position bands of the NMSE summary: [0, 64), [64, 256), [256, 1024), ... (×4), cut at T.
struct PositionBand {
  int begin = 0, end = 0;  // positions begin ≤ t < end
};
std::vector<PositionBand> position_bands(int T);

}  // namespace golinear::analysis
