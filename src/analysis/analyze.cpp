#include "analysis/analyze.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>

#include "analysis/diagnostics.h"
#include "common/json.h"
#include "common/progress.h"
#include "model/linearization.h"

namespace golinear::analysis {

namespace {

double ratio(double numerator, double denominator) {
  if (denominator > 0) return numerator / denominator;
  return numerator == 0 ? 0.0 : std::numeric_limits<double>::infinity();
}

// Running sums of one student's errors against the teacher.
struct StudentSums {
  std::vector<double> layer_error, layer_reference;        // (L)
  std::vector<double> head_error, head_reference;          // (L, H)
  std::vector<double> position_error, position_reference;  // (L, T)
  std::vector<double> point_error, point_reference;        // (L, G, T)
};

std::vector<double> column(const std::vector<double>& values, const std::vector<int>& rows) {
  std::vector<double> out;
  for (int r : rows) out.push_back(values[r]);
  return out;
}

void add_correlations(const AnalysisResult& r, StudentResult& s) {
  std::vector<int> linear_layers;
  for (int l = 0; l < r.L; ++l)
    if (s.linearized(l)) linear_layers.push_back(l);
  const std::vector<double> nmse = column(s.layer_nmse, linear_layers);
  auto layer = [&](const std::string& name, const std::vector<double>& values) {
    s.correlations.push_back({name, "layer", (long)linear_layers.size(),
                              spearman(column(values, linear_layers), nmse)});
  };
  layer("concentration", r.concentration);
  layer("residual", r.residual);
  if (r.attention_mass) {
    layer("sink_mass", r.sink_mass);
    layer("far_mass", r.far_mass);
  }
  layer("hardness_teacher", r.hardness);

  // Token level: one point per (linearized layer, kv head, position).
  std::vector<double> concentration, residual, position, point_nmse;
  for (int l : linear_layers)
    for (int g = 0; g < r.G; ++g)
      for (int t = 0; t < r.T; ++t) {
        const long i = ((long)l * r.G + g) * r.T + t;
        concentration.push_back(r.point_concentration[i]);
        residual.push_back(r.point_residual[i]);
        position.push_back(t);
        point_nmse.push_back(s.point_nmse[i]);
      }
  const long n = (long)point_nmse.size();
  s.correlations.push_back({"concentration", "token", n, spearman(concentration, point_nmse)});
  s.correlations.push_back({"residual", "token", n, spearman(residual, point_nmse)});
  s.correlations.push_back({"position", "token", n, spearman(position, point_nmse)});

  // Position is a confounder: concentration falls with t and, in a hybrid, the linear branch is
  // read only from t = s + w on. "token_linear" keeps the points t ≥ s + w; "within_position"
  // averages, over those positions, the correlation across the (layer, kv head) points of one
  // position (n: the positions averaged).
  const int first = std::min(r.T, s.sinks + s.window);
  std::vector<double> c_far, r_far, p_far, nmse_far;
  for (size_t i = 0; i < point_nmse.size(); ++i)
    if (position[i] >= first) {
      c_far.push_back(concentration[i]);
      r_far.push_back(residual[i]);
      p_far.push_back(position[i]);
      nmse_far.push_back(point_nmse[i]);
    }
  const long n_far = (long)nmse_far.size();
  s.correlations.push_back({"concentration", "token_linear", n_far, spearman(c_far, nmse_far)});
  s.correlations.push_back({"residual", "token_linear", n_far, spearman(r_far, nmse_far)});
  s.correlations.push_back({"position", "token_linear", n_far, spearman(p_far, nmse_far)});
  double c_sum = 0, r_sum = 0;
  long c_count = 0, r_count = 0;
  std::vector<double> c_at, r_at, nmse_at;
  for (int t = first; t < r.T; ++t) {
    c_at.clear(), r_at.clear(), nmse_at.clear();
    for (int l : linear_layers)
      for (int g = 0; g < r.G; ++g) {
        const long i = ((long)l * r.G + g) * r.T + t;
        c_at.push_back(r.point_concentration[i]);
        r_at.push_back(r.point_residual[i]);
        nmse_at.push_back(s.point_nmse[i]);
      }
    if (const double rho = spearman(c_at, nmse_at); !std::isnan(rho)) c_sum += rho, ++c_count;
    if (const double rho = spearman(r_at, nmse_at); !std::isnan(rho)) r_sum += rho, ++r_count;
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  s.correlations.push_back({"concentration", "within_position", c_count, c_count ? c_sum / c_count : nan});
  s.correlations.push_back({"residual", "within_position", r_count, r_count ? r_sum / r_count : nan});
}

}  // namespace

Result<StudentMixers> student_mixers_load(Model& teacher, const std::string& dir,
                                          const std::string& label) {
  const std::string json_path = dir + "/linearization.json";
  GL_ASSIGN_OR_RETURN(Json json, json_read_file(json_path));
  GL_ASSIGN_OR_RETURN(LinearizationRecipe recipe,
                      linearization_recipe_parse(json, teacher.config, json_path));
  MixerStack teacher_mixers = std::move(teacher.mixers);
  Status applied = linearization_apply(teacher, dir);
  StudentMixers student;
  student.label = label;
  student.dir = dir;
  student.options = recipe.options;
  student.mixers = std::move(teacher.mixers);
  teacher.mixers = std::move(teacher_mixers);
  // The layerwise analysis runs the student's mixers on the teacher's q/k/v (as attention
  // transfer does): LoRA adapters of the student, if any, are not part of it, and must not stay
  // on the teacher.
  teacher.lora = LoraAdapters{};
  if (!applied.ok()) return std::move(applied).take_error();
  return student;
}

Result<AnalysisResult> analysis_run(const Model& teacher, const TeacherTrace& teacher_trace,
                                    const std::vector<StudentMixers>& students,
                                    const int32_t* tokens, long N, int T,
                                    const AnalysisOptions& options) {
  const ModelConfig& c = teacher.config;
  const int L = c.num_layers, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim;
  for (int l = 0; l < L; ++l)
    if (teacher.mixers[l]->kind() != "softmax")
      return make_error("analyze: the teacher's layer ", l, " is '", teacher.mixers[l]->kind(),
                        "', not softmax attention; analyze the base checkpoint and pass the "
                        "linearized one with --student");
  if (N < 1 || T < 2) return make_error("analyze: need at least one sequence of 2 tokens or more (got ", N, " of ", T, ")");
  if (options.sinks < 0 || options.window < 0)
    return make_error("analyze: sinks and window must be >= 0 (got ", options.sinks, ", ", options.window, ")");
  for (const StudentMixers& s : students)
    if ((int)s.mixers.size() != L)
      return make_error("analyze: student '", s.label, "' has ", s.mixers.size(), " mixers, the teacher ", L, " layers");

  AnalysisResult r;
  r.L = L, r.H = H, r.G = G, r.D = D, r.T = T;
  r.sequences = N;
  r.sinks = options.sinks, r.window = options.window;
  r.attention_mass = options.attention_mass;
  std::vector<double> head_concentration((long)L * G), head_residual((long)L * G),
      head_sink((long)L * H), head_far((long)L * H), position_concentration((long)L * T),
      position_residual((long)L * T), position_sink((long)L * T), position_far((long)L * T),
      point_concentration((long)L * G * T), point_residual((long)L * G * T);
  std::vector<StudentSums> sums(students.size());
  for (StudentSums& s : sums) {
    s.layer_error.assign(L, 0.0), s.layer_reference.assign(L, 0.0);
    s.head_error.assign((long)L * H, 0.0), s.head_reference.assign((long)L * H, 0.0);
    s.position_error.assign((long)L * T, 0.0), s.position_reference.assign((long)L * T, 0.0);
    s.point_error.assign((long)L * G * T, 0.0), s.point_reference.assign((long)L * G * T, 0.0);
  }

  ProgressBar bar("analyze", N);
  std::vector<float> k_hat((long)T * G * D), concentration((long)T * G), residual((long)T * G),
      sink((long)T * H), far((long)T * H), y((long)T * H * D);
  std::vector<double> error((long)T * H), reference((long)T * H);
  for (long n = 0; n < N; ++n) {
    ForwardTrace trace;
    GL_TRY(teacher_trace(tokens + n * T, T, !students.empty(), &trace));
    if ((int)trace.layers.size() != L)
      return make_error("analyze: the teacher trace has ", trace.layers.size(), " layers, not ", L);
    for (int l = 0; l < L; ++l) {
      const ForwardTrace::Layer& io = trace.layers[l];
      unit_keys(k_hat.data(), io.k.data(), T, G, D);
      key_concentration(concentration.data(), k_hat.data(), T, G, D);
      projection_residual(residual.data(), k_hat.data(), T, G, D);
      for (int t = 0; t < T; ++t)
        for (int g = 0; g < G; ++g) {
          const double cv = concentration[(long)t * G + g], rv = residual[(long)t * G + g];
          head_concentration[(long)l * G + g] += cv;
          head_residual[(long)l * G + g] += rv;
          position_concentration[(long)l * T + t] += cv;
          position_residual[(long)l * T + t] += rv;
          point_concentration[((long)l * G + g) * T + t] += cv;
          point_residual[((long)l * G + g) * T + t] += rv;
        }
      if (options.attention_mass) {
        attention_mass(sink.data(), far.data(), io.q.data(), io.k.data(), teacher.inv_freq.data(),
                       T, H, G, D, options.sinks, options.window);
        for (int t = 0; t < T; ++t)
          for (int h = 0; h < H; ++h) {
            head_sink[(long)l * H + h] += sink[(long)t * H + h];
            head_far[(long)l * H + h] += far[(long)t * H + h];
            position_sink[(long)l * T + t] += sink[(long)t * H + h];
            position_far[(long)l * T + t] += far[(long)t * H + h];
          }
      }
      for (size_t s = 0; s < students.size(); ++s) {
        const mixers::MixerInputs in = io.inputs(T, teacher.inv_freq.data());
        students[s].mixers[l]->forward(in, y.data());
        std::fill(error.begin(), error.end(), 0.0);
        std::fill(reference.begin(), reference.end(), 0.0);
        accumulate_squared_error(error.data(), reference.data(), y.data(), io.y.data(),
                                 (long)T * H, D);
        StudentSums& ss = sums[s];
        for (int t = 0; t < T; ++t)
          for (int h = 0; h < H; ++h) {
            const double e = error[(long)t * H + h], f = reference[(long)t * H + h];
            const long point = ((long)l * G + h / (H / G)) * T + t;
            ss.layer_error[l] += e, ss.layer_reference[l] += f;
            ss.head_error[(long)l * H + h] += e, ss.head_reference[(long)l * H + h] += f;
            ss.position_error[(long)l * T + t] += e, ss.position_reference[(long)l * T + t] += f;
            ss.point_error[point] += e, ss.point_reference[point] += f;
          }
      }
    }
    if (options.show_progress) bar.update(n + 1, (double)(n + 1) * T);
  }
  if (options.show_progress) bar.finish();

  // Means.
  auto divide = [](std::vector<double> v, double by) {
    for (double& x : v) x /= by;
    return v;
  };
  r.head_concentration = divide(head_concentration, (double)N * T);
  r.head_residual = divide(head_residual, (double)N * T);
  r.position_concentration = divide(position_concentration, (double)N * G);
  r.position_residual = divide(position_residual, (double)N * G);
  r.point_concentration = divide(point_concentration, (double)N);
  r.point_residual = divide(point_residual, (double)N);
  r.concentration.assign(L, 0.0), r.residual.assign(L, 0.0);
  for (int l = 0; l < L; ++l)
    for (int g = 0; g < G; ++g) {
      r.concentration[l] += r.head_concentration[(long)l * G + g] / G;
      r.residual[l] += r.head_residual[(long)l * G + g] / G;
    }
  if (options.attention_mass) {
    r.head_sink_mass = divide(head_sink, (double)N * T);
    r.head_far_mass = divide(head_far, (double)N * T);
    r.position_sink_mass = divide(position_sink, (double)N * H);
    r.position_far_mass = divide(position_far, (double)N * H);
    r.sink_mass.assign(L, 0.0), r.far_mass.assign(L, 0.0);
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) {
        r.sink_mass[l] += r.head_sink_mass[(long)l * H + h] / H;
        r.far_mass[l] += r.head_far_mass[(long)l * H + h] / H;
      }
  }
  r.hardness = layer_hardness(r.concentration, r.residual);

  for (size_t s = 0; s < students.size(); ++s) {
    const StudentSums& ss = sums[s];
    StudentResult out;
    out.label = students[s].label;
    out.dir = students[s].dir;
    out.sinks = students[s].options.sinks;
    out.window = students[s].options.window;
    for (const auto& mixer : students[s].mixers) out.layer_kinds.push_back(mixer->kind());
    auto ratios = [](const std::vector<double>& e, const std::vector<double>& f) {
      std::vector<double> v(e.size());
      for (size_t i = 0; i < e.size(); ++i) v[i] = ratio(e[i], f[i]);
      return v;
    };
    out.layer_nmse = ratios(ss.layer_error, ss.layer_reference);
    out.head_nmse = ratios(ss.head_error, ss.head_reference);
    out.position_nmse = ratios(ss.position_error, ss.position_reference);
    out.point_nmse = ratios(ss.point_error, ss.point_reference);
    out.hardness = layer_hardness(r.concentration, r.residual, out.layer_nmse);
    add_correlations(r, out);
    r.students.push_back(std::move(out));
  }
  return r;
}

Result<AnalysisResult> analysis_run(const Model& teacher, const std::vector<StudentMixers>& students,
                                    const int32_t* tokens, long N, int T,
                                    const AnalysisOptions& options) {
  const TeacherTrace trace = [&teacher](const int32_t* ids, int n, bool, ForwardTrace* out) {
    out->capture_mixer_io = true;
    model_forward(teacher, ids, n, nullptr, false, out);
    return ok_status();
  };
  return analysis_run(teacher, trace, students, tokens, N, T, options);
}

namespace {

// Σ −log p(token t+1 | ..t) over the N sequences, and the number of predictions.
struct NllSum {
  double nll = 0;
  long count = 0;
  double perplexity() const { return std::exp(nll / std::max(1L, count)); }
};

Result<NllSum> sequences_nll(const SequenceNll& nll, const int32_t* tokens, long N, int T) {
  NllSum sum;
  for (long n = 0; n < N; ++n) {
    GL_ASSIGN_OR_RETURN(double s, nll(tokens + n * T, T));
    sum.nll += s;
    sum.count += T - 1;
  }
  return sum;
}

// The CPU model's SequenceNll (model_forward of its mixers as they stand); `model` must outlive it.
SequenceNll cpu_sequence_nll(const Model& model) {
  auto logits = std::make_shared<std::vector<float>>();
  return [&model, logits](const int32_t* ids, int T) -> Result<double> {
    const int V = model.config.vocab_size;
    logits->resize((size_t)T * V);
    model_forward(model, ids, T, logits->data());
    double nll = 0;
    for (float lp : logprobs_of_next_tokens(logits->data(), ids, T, V)) nll -= lp;
    return nll;
  };
}

}  // namespace

Result<std::vector<double>> layer_sensitivity(const SequenceNll& nll, const LayerMixerSwap& swap,
                                              const MixerStack& student, const int32_t* tokens,
                                              long N, int T, double* teacher_ppl,
                                              const std::function<void()>& step) {
  // The teacher's perplexity, measured unless the caller already knows it.
  const bool known = teacher_ppl && std::isfinite(*teacher_ppl);
  double base = known ? *teacher_ppl : 0.0;
  if (!known) {
    GL_ASSIGN_OR_RETURN(NllSum teacher, sequences_nll(nll, tokens, N, T));
    base = teacher.perplexity();
    if (step) step();
  }
  if (teacher_ppl) *teacher_ppl = base;
  const int L = (int)student.size();
  std::vector<double> out(L, std::numeric_limits<double>::quiet_NaN());
  for (int l = 0; l < L; ++l) {
    if (student[l]->kind() == "softmax") continue;
    GL_TRY(swap(l, true));
    Result<NllSum> swapped = sequences_nll(nll, tokens, N, T);
    GL_TRY(swap(l, false));
    if (!swapped.ok()) return std::move(swapped).take_error();
    out[l] = swapped->perplexity() / base - 1.0;
    if (step) step();
  }
  return out;
}

Result<std::vector<double>> layer_sensitivity(Model& teacher, MixerStack& student,
                                              const int32_t* tokens, long N, int T,
                                              double* teacher_ppl, const std::function<void()>& step) {
  const int L = teacher.config.num_layers;
  if ((int)student.size() != L)
    return make_error("analyze: a student of ", student.size(), " layers for a teacher of ", L);
  if (teacher.lora.enabled())
    return make_error("analyze: the teacher carries LoRA adapters; the sensitivity needs the base");
  if (!teacher.has_backbone())
    return make_error("analyze: the sensitivity runs the model on the CPU; its weights are not on the host");
  // Swapping twice restores: the student's mixer goes in and comes back out.
  const LayerMixerSwap swap = [&teacher, &student](int l, bool) {
    std::swap(teacher.mixers[l], student[l]);
    return ok_status();
  };
  return layer_sensitivity(cpu_sequence_nll(teacher), swap, student, tokens, N, T, teacher_ppl, step);
}

Status add_layer_sensitivity(Model& teacher, std::vector<StudentMixers>& students,
                             AnalysisResult& result, const int32_t* tokens, long N, int T,
                             bool show_progress) {
  const int L = teacher.config.num_layers;
  if (result.students.size() != students.size())
    return make_error("analyze: ", result.students.size(), " student results for ", students.size(), " students");
  long forwards = 1, done = 0;  // the teacher, then each student's layers and whole
  for (const StudentResult& s : result.students)
    for (int l = 0; l < L; ++l) forwards += s.linearized(l) ? 1 : 0;
  forwards += (long)students.size();
  ProgressBar bar("sensitivity", forwards);
  auto step = [&] {
    if (show_progress) bar.update(++done, (double)done * N * T);
  };
  const SequenceNll nll = cpu_sequence_nll(teacher);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  double teacher_ppl = nan;  // measured by the first student's layer_sensitivity
  for (size_t i = 0; i < students.size(); ++i) {
    StudentResult& out = result.students[i];
    MixerStack& mixers = students[i].mixers;
    GL_ASSIGN_OR_RETURN(out.layer_sensitivity,
                        layer_sensitivity(teacher, mixers, tokens, N, T, &teacher_ppl, step));
    out.teacher_ppl = teacher_ppl;
    for (int l = 0; l < L; ++l) std::swap(teacher.mixers[l], mixers[l]);
    Result<NllSum> whole = sequences_nll(nll, tokens, N, T);
    for (int l = 0; l < L; ++l) std::swap(teacher.mixers[l], mixers[l]);
    if (!whole.ok()) return std::move(whole).take_error();
    out.student_ppl = whole->perplexity();
    step();
    std::vector<double> sensitivity, nmse;
    for (int l = 0; l < L; ++l)
      if (out.linearized(l)) sensitivity.push_back(out.layer_sensitivity[l]), nmse.push_back(out.layer_nmse[l]);
    out.correlations.push_back({"sensitivity", "layer", (long)sensitivity.size(),
                                sensitivity.size() >= 2 ? spearman(sensitivity, nmse) : nan});
  }
  if (show_progress) bar.finish();
  return ok_status();
}

Result<std::vector<double>> teacher_layer_hardness(const Model& teacher, const int32_t* tokens,
                                                   long N, int T, bool show_progress) {
  AnalysisOptions options;
  options.attention_mass = false;
  options.show_progress = show_progress;
  GL_ASSIGN_OR_RETURN(AnalysisResult result, analysis_run(teacher, {}, tokens, N, T, options));
  return result.hardness;
}

std::vector<int> hardness_ranking(const std::vector<double>& hardness) {
  std::vector<int> order(hardness.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return hardness[a] > hardness[b]; });
  return order;
}

}  // namespace golinear::analysis
