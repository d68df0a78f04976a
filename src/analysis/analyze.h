// `golinear analyze`: the diagnostics of DESIGN.md §5 gathered over a set of token sequences.
//
// One teacher forward per sequence records, per layer, the attention block's input and the
// teacher's q, k, v and attention output (ForwardTrace). From them:
//   teacher   key concentration and projection residual of the unit keys (analysis/diagnostics.h)
//             per kv head and position; sink mass and far mass of the teacher's attention
//             probabilities per query head and position;
//   students  each student mixer runs on the teacher's inputs of its layer (as attention transfer
//             trains it), and its output is compared with the teacher's: NMSE per layer, per head,
//             per position and per (kv head, position) point;
//   hardness  per layer, from the layer means (analysis/diagnostics.h layer_hardness): from the
//             teacher alone, and for each student with its NMSE added;
//   Spearman rank correlations of the diagnostics with each student's NMSE, over the layers,
//             over the (layer, kv head, position) points of the linearized layers, and with the
//             position confound removed (see Correlation::level).
// Aggregation: "mean" is the plain mean over sequences (and heads, positions); NMSE is always a
// ratio of sums, Σ‖y^S − y^T‖² / Σ‖y^T‖², over what it aggregates.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/result.h"
#include "mixers/mixer_factory.h"
#include "model/transformer.h"

namespace golinear::analysis {

struct AnalysisOptions {
  int sinks = 8;              // s: sink mass is the attention on keys j < s
  int window = 56;            // w: far mass is the attention on keys s ≤ j ≤ t − w
  bool attention_mass = true; // false: skip the O(T²) recomputation of the teacher's attention
  bool show_progress = false; // a progress bar on stderr
};

// A linearized model's mixers, to be compared with the teacher they were trained from.
struct StudentMixers {
  std::string label;              // shown in plots and tables
  std::string dir;                // where it was loaded from
  mixers::MixerOptions options;   // its recipe (sinks, window, kind)
  MixerStack mixers;              // (L)
};

// The mixers of the linearized checkpoint `dir` (linearization.json + .safetensors), built for
// `teacher`'s shapes; teacher.mixers is left as it was. The recipe is checked against the
// teacher's config; the student's base weights are not read: `dir` must be a linearization of
// this teacher.
Result<StudentMixers> student_mixers_load(Model& teacher, const std::string& dir,
                                          const std::string& label);

// One Spearman correlation of a diagnostic with a student's NMSE.
struct Correlation {
  std::string diagnostic;  // "concentration", "residual", "sink_mass", "far_mass", "position",
                           // "hardness_teacher"
  std::string level;       // "layer": one point per linearized layer;
                           // "token": one point per linearized layer, kv head and position
                           //   (diagnostics and NMSE over the sequences);
                           // "token_linear": the token points at t ≥ s + w of the student (where
                           //   its linear branch is read);
                           // "within_position": per position t ≥ s + w the correlation across the
                           //   (linearized layer, kv head) points of that position, averaged over
                           //   the positions (n: the positions), free of the position confound
  long n = 0;
  double rho = 0;          // NaN when undefined (n < 2 or a constant side)
};

struct StudentResult {
  std::string label, dir;
  int sinks = 0, window = 0;             // its recipe's s and w
  std::vector<std::string> layer_kinds;  // (L) "softmax" for the layers it keeps full
  std::vector<double> layer_nmse;        // (L)
  std::vector<double> head_nmse;         // (L, H)
  std::vector<double> position_nmse;     // (L, T) over sequences and query heads
  std::vector<double> point_nmse;        // (L, G, T) over sequences and the group's query heads
  std::vector<double> hardness;          // (L) layer_hardness with this student's NMSE
  std::vector<Correlation> correlations;
  // Leave-one-layer-linearized sensitivity (add_layer_sensitivity; empty / NaN unless measured):
  // the perplexity of the teacher with only layer l's mixer the student's, relative to the
  // teacher's, minus 1 ((L), NaN for the layers the student keeps as softmax); the teacher's and
  // the whole student's perplexity on the same sequences (LoRA adapters not applied, as above).
  std::vector<double> layer_sensitivity;
  double teacher_ppl = std::numeric_limits<double>::quiet_NaN();
  double student_ppl = std::numeric_limits<double>::quiet_NaN();
  bool linearized(int layer) const { return layer_kinds[layer] != "softmax"; }
};

struct AnalysisResult {
  int L = 0, H = 0, G = 0, D = 0, T = 0;
  long sequences = 0;
  int sinks = 0, window = 0;
  bool attention_mass = false;
  // Teacher, per layer (L): means over sequences, heads and positions.
  std::vector<double> concentration, residual, sink_mass, far_mass;
  std::vector<double> head_concentration, head_residual;  // (L, G)
  std::vector<double> head_sink_mass, head_far_mass;      // (L, H)
  std::vector<double> position_concentration, position_residual;  // (L, T) over sequences, kv heads
  std::vector<double> position_sink_mass, position_far_mass;      // (L, T) over sequences, query heads
  std::vector<double> point_concentration, point_residual;        // (L, G, T) over sequences
  std::vector<double> hardness;  // (L) teacher only: concentration and residual
  std::vector<StudentResult> students;
};

// The teacher's forward of one sequence of T tokens from position 0, filling trace->layers (L):
// q and k always; x, v and y too when `mixer_io` (the students' inputs and their reference).
// The CPU model's (model_forward with capture_mixer_io) or the GPU's (analysis/cuda/gpu_trace.h).
using TeacherTrace =
    std::function<Status(const int32_t* tokens, int T, bool mixer_io, ForwardTrace* trace)>;

// The analysis of `teacher` (every mixer softmax) on N sequences of T tokens, tokens (N, T), with
// each student compared against it: the teacher's forward by `trace`, the diagnostics and the
// students' mixers on the CPU (on the traced inputs).
Result<AnalysisResult> analysis_run(const Model& teacher, const TeacherTrace& trace,
                                    const std::vector<StudentMixers>& students,
                                    const int32_t* tokens, long N, int T,
                                    const AnalysisOptions& options);
// The same with the CPU model's forward.
Result<AnalysisResult> analysis_run(const Model& teacher, const std::vector<StudentMixers>& students,
                                    const int32_t* tokens, long N, int T,
                                    const AnalysisOptions& options);

// The leave-one-layer-linearized sensitivity of each student (issue 14: a signal for the per-layer
// exact budgets beside the transfer NMSE and the hardness): for every layer l a student
// linearizes, the teacher's perplexity on the N sequences of T tokens (tokens (N, T), the
// analysis's own) with its layer l's mixer swapped for the student's, all others softmax; fills
// result.students[i].layer_sensitivity, teacher_ppl, student_ppl and adds the Spearman
// correlation of the sensitivity with the NMSE over the linearized layers ("sensitivity",
// "layer"). CPU forwards per sequence: 1 for the teacher, then (linearized layers + 1) per student. The teacher's mixers
// are swapped in and back; on return `teacher` and `students` are as they were.
// One student's layer sensitivity: for each layer l that `student` linearizes (kind() !=
// "softmax"), ppl(teacher with layer l's mixer swapped for the student's) / ppl(teacher) − 1 on
// the N sequences of T tokens; NaN for the layers it keeps softmax. `teacher_ppl`: a finite value
// there is taken as ppl(teacher) on these tokens, else it receives the one measured. CPU
// forwards: the linearized layers (+1 for the teacher); `step` (may be empty) after each. The
// mixers are swapped back before it returns.
// Also the input of `linearize --window-by sensitivity` (train/linearize.cpp).
Result<std::vector<double>> layer_sensitivity(Model& teacher, MixerStack& student,
                                              const int32_t* tokens, long N, int T,
                                              double* teacher_ppl = nullptr,
                                              const std::function<void()>& step = {});

// What layer_sensitivity runs on a device: Σ_t −log p(tokens[t + 1] | tokens[..t]) of one
// sequence of T tokens from position 0 under the model's mixers as they stand (the CPU model's
// forward, or the GPU's: analysis/cuda/analyze.h) ...
using SequenceNll = std::function<Result<double>(const int32_t* tokens, int T)>;
// ... and layer `layer`'s mixer set to the student's (student = true) or back to the teacher's.
using LayerMixerSwap = std::function<Status(int layer, bool student)>;
// layer_sensitivity's measurement with the device's forward: the teacher's NLL (unless
// `teacher_ppl` holds a finite value, as above), then for each layer that `student` linearizes,
// the NLL with that layer swapped (and swapped back, also when the forward fails); the layers,
// their kinds and the result as above.
Result<std::vector<double>> layer_sensitivity(const SequenceNll& nll, const LayerMixerSwap& swap,
                                              const MixerStack& student, const int32_t* tokens,
                                              long N, int T, double* teacher_ppl = nullptr,
                                              const std::function<void()>& step = {});

Status add_layer_sensitivity(Model& teacher, std::vector<StudentMixers>& students,
                             AnalysisResult& result, const int32_t* tokens, long N, int T,
                             bool show_progress = false);

// Per-layer hardness (L) of `teacher` from the teacher alone (no student needed): layer_hardness
// of its mean key concentration and projection residual over N sequences of T tokens, tokens
// (N, T) (e.g. a PackedDataset, io/packed_dataset.h: data.tokens.data(), data.size(), data.seq_len). Feed it to
// select_full_layers(hardness, K, "hard").
Result<std::vector<double>> teacher_layer_hardness(const Model& teacher, const int32_t* tokens,
                                                   long N, int T, bool show_progress = false);

// Layers ordered hardest first (ties: lower index first).
std::vector<int> hardness_ranking(const std::vector<double>& hardness);

}  // namespace golinear::analysis
