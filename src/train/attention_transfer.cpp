#include "train/attention_transfer.h"

#include <cblas.h>  // openblas_get_num_threads, openblas_set_num_threads

#include <chrono>
#include <cmath>
#include <cstring>

#include "common/file.h"
#include "common/progress.h"
#include "io/safetensors.h"

namespace golinear::train {

double nmse_loss(const float* student, const float* teacher, long n, float* dy) {
  double err = 0.0, ref = 0.0;
  for (long i = 0; i < n; ++i) {
    const double d = (double)student[i] - teacher[i];
    err += d * d;
    ref += (double)teacher[i] * teacher[i];
  }
  ref = std::max(ref, 1e-12);
  if (dy)
    for (long i = 0; i < n; ++i) dy[i] = (float)(2.0 * ((double)student[i] - teacher[i]) / ref);
  return err / ref;
}

std::vector<mixers::Parameter*> trainable_parameters(MixerStack& students) {
  std::vector<mixers::Parameter*> params;
  for (auto& mixer : students)
    for (mixers::Parameter* p : mixer->parameters()) params.push_back(p);
  return params;
}

Status train_state_save(const std::string& path, MixerStack& students, AdamW& optimizer, long step) {
  std::vector<TensorToWrite> tensors;
  for (size_t l = 0; l < students.size(); ++l)
    for (mixers::Parameter* p : students[l]->parameters())
      tensors.push_back({str_cat("layers.", l, ".", p->name), p->shape, p->value.data()});
  const int64_t n = (int64_t)optimizer.first_moments().size();
  tensors.push_back({"adam.m", {n}, optimizer.first_moments().data()});
  tensors.push_back({"adam.v", {n}, optimizer.second_moments().data()});
  return safetensors_write(path, tensors,
                           {{"step", std::to_string(step)},
                            {"adam_t", std::to_string(optimizer.steps_taken())}});
}

Result<long> train_state_load(const std::string& path, MixerStack& students, AdamW& optimizer) {
  GL_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::open(path));
  for (size_t l = 0; l < students.size(); ++l) {
    for (mixers::Parameter* p : students[l]->parameters()) {
      const std::string name = str_cat("layers.", l, ".", p->name);
      const TensorView* t = file->find(name);
      if (!t || t->shape != p->shape)
        return make_error(path, ": resume state does not match this run (parameter '", name, "')");
      GL_TRY(tensor_to_f32(*t, p->value.data(), path));
    }
  }
  const TensorView* m = file->find("adam.m");
  const TensorView* v = file->find("adam.v");
  if (!m || !v || m->numel() != (int64_t)optimizer.first_moments().size() ||
      v->numel() != (int64_t)optimizer.second_moments().size())
    return make_error(path, ": resume state has no matching optimizer moments");
  GL_TRY(tensor_to_f32(*m, optimizer.first_moments().data(), path));
  GL_TRY(tensor_to_f32(*v, optimizer.second_moments().data(), path));
  const auto& meta = file->metadata();
  if (!meta.count("step") || !meta.count("adam_t"))
    return make_error(path, ": resume state lacks its step");
  optimizer.steps_taken() = std::stol(meta.at("adam_t"));
  return std::stol(meta.at("step"));
}

Result<TrainReport> attention_transfer(const Model& teacher, MixerStack& students,
                                       const PackedDataset& data, const TrainOptions& options) {
  const int L = teacher.config.num_layers, T = data.seq_len;
  if (data.size() == 0) return make_error("attention transfer: no training sequences");
  std::vector<int> trained;
  for (int l = 0; l < L; ++l)
    if (students[l]->kind() != "softmax") trained.push_back(l);
  if (trained.empty()) return make_error("attention transfer: every layer is kept full, nothing to train");

  AdamW optimizer(trainable_parameters(students), options.adam);
  long start = 0;
  if (options.resume && file_exists(options.state_path)) {
    GL_ASSIGN_OR_RETURN(start, train_state_load(options.state_path, students, optimizer));
  }
  TrainReport report;
  report.steps_done = start;
  report.layer_nmse.assign(L, -1.0);
  std::vector<double> layer_sum(L, 0.0);
  long tail_steps = 0;
  const long tail_from = options.steps - std::max(1L, options.steps / 10);
  ProgressBar bar("transfer", options.steps);
  const auto t0 = std::chrono::steady_clock::now();
  long tokens_this_run = 0;
  const long H = teacher.config.num_heads, D = teacher.config.head_dim;
  for (long step = start; step < options.steps; ++step) {
    std::vector<double> step_nmse(L, 0.0);
    for (int b = 0; b < options.batch; ++b) {
      const long index = (step * options.batch + b) % data.size();
      ForwardTrace trace;
      trace.capture_mixer_io = true;
      model_forward(teacher, data.sequence(index), T, nullptr, false, &trace);
      // One layer per core below: the students' BLAS calls stay on their thread (OpenBLAS's own
      // threads would oversubscribe the cores the layers already occupy).
      const int blas_threads = openblas_get_num_threads();
      openblas_set_num_threads(1);
#pragma omp parallel for schedule(dynamic, 1)
      for (size_t i = 0; i < trained.size(); ++i) {
        const int l = trained[i];
        const ForwardTrace::Layer& io = trace.layers[l];
        mixers::MixerInputs in;
        in.T = T;
        in.x = io.x.data();
        in.q = io.q.data();
        in.k = io.k.data();
        in.v = io.v.data();
        in.inv_freq = teacher.inv_freq.data();
        std::vector<float> y((long)T * H * D), dy((long)T * H * D);
        students[l]->forward(in, y.data());
        step_nmse[l] += nmse_loss(y.data(), io.y.data(), (long)y.size(), dy.data());
        // loss = mean over layers and over the batch of each layer's NMSE.
        const float scale = 1.0f / (float)(trained.size() * options.batch);
        for (float& g : dy) g *= scale;
        students[l]->backward(in, dy.data(), {});
      }
      openblas_set_num_threads(blas_threads);
      tokens_this_run += T;
    }
    const float lr = learning_rate_at(step, options.steps, options.warmup, options.lr);
    optimizer.step(lr);
    double loss = 0.0;
    for (int l : trained) loss += step_nmse[l] / options.batch;
    loss /= trained.size();
    report.loss_curve.push_back(loss);
    if (step >= tail_from) {
      ++tail_steps;
      report.final_loss += loss;
      for (int l : trained) layer_sum[l] += step_nmse[l] / options.batch;
    }
    report.steps_done = step + 1;
    bar.update(step + 1, (double)tokens_this_run, str_cat("nmse ", std::to_string(loss).substr(0, 6), " · lr ", lr));
    // The last step is always saved, so a resumed multi-stage run can skip a finished stage.
    const bool checkpoint = !options.state_path.empty() &&
                            ((options.checkpoint_every > 0 && (step + 1) % options.checkpoint_every == 0) ||
                             step + 1 == options.steps);
    const bool stopping = options.stop_after > 0 && step + 1 - start >= options.stop_after;
    if ((checkpoint || stopping) && !options.state_path.empty())
      GL_TRY(train_state_save(options.state_path, students, optimizer, step + 1));
    if (stopping) break;
  }
  bar.finish();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  report.tokens_per_s = seconds > 0 ? tokens_this_run / seconds : 0;
  if (tail_steps > 0) {
    report.final_loss /= tail_steps;
    for (int l : trained) report.layer_nmse[l] = layer_sum[l] / tail_steps;
  }
  return report;
}

}  // namespace golinear::train
