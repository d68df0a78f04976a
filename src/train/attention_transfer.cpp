#include "train/attention_transfer.h"

#include <cblas.h>  // openblas_get_num_threads, openblas_set_num_threads

#include <cmath>
#include <cstring>

#include "common/file.h"
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

Status train_state_save(const std::string& path, MixerStack& students, AdamW& optimizer, long step,
                        LoraAdapters* lora) {
  std::vector<TensorToWrite> tensors;
  for (auto& [name, p] : mixer_named_parameters(students))
    tensors.push_back({name, p->shape, p->value.data()});
  if (lora)
    for (auto& [name, p] : lora->named_parameters()) tensors.push_back({name, p->shape, p->value.data()});
  const int64_t n = (int64_t)optimizer.first_moments().size();
  tensors.push_back({"adam.m", {n}, optimizer.first_moments().data()});
  tensors.push_back({"adam.v", {n}, optimizer.second_moments().data()});
  return safetensors_write(path, tensors,
                           {{"step", std::to_string(step)},
                            {"adam_t", std::to_string(optimizer.steps_taken())}});
}

Result<long> train_state_load(const std::string& path, MixerStack& students, AdamW& optimizer,
                              LoraAdapters* lora) {
  GL_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::open(path));
  std::vector<std::pair<std::string, mixers::Parameter*>> named = mixer_named_parameters(students);
  if (lora)
    for (auto& entry : lora->named_parameters()) named.push_back(entry);
  for (auto& [name, p] : named) {
    const TensorView* t = file->find(name);
    if (!t || t->shape != p->shape)
      return make_error(path, ": resume state does not match this run (parameter '", name, "')");
    GL_TRY(tensor_to_f32(*t, p->value.data(), path));
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
  auto parse_count = [&](const std::string& key) -> Result<long> {
    const std::string& text = meta.at(key);
    char* end = nullptr;
    const long value = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || value < 0)
      return make_error(path, ": resume state has an invalid ", key, " '", text, "'");
    return value;
  };
  GL_ASSIGN_OR_RETURN(optimizer.steps_taken(), parse_count("adam_t"));
  return parse_count("step");
}

Result<TrainReport> attention_transfer(const Model& teacher, MixerStack& students,
                                       const PackedDataset& data, const TrainOptions& options) {
  GL_ASSIGN_OR_RETURN(std::vector<TrainReport> reports,
                      attention_transfer_many(teacher, {&students}, data, options, {options.state_path}));
  return std::move(reports[0]);
}

Result<std::vector<TrainReport>> attention_transfer_many(
    const Model& teacher, const std::vector<MixerStack*>& stacks, const PackedDataset& data,
    const TrainOptions& options, const std::vector<std::string>& state_paths) {
  const int L = teacher.config.num_layers, T = data.seq_len;
  const size_t R = stacks.size();
  if (data.size() == 0) return make_error("attention transfer: no training sequences");
  if (state_paths.size() != R) return make_error("attention transfer: one state path per recipe expected");
  // The work of one step: every (recipe, trained layer) pair, independent of the others.
  struct Job {
    size_t recipe;
    int layer;
  };
  std::vector<Job> jobs;
  std::vector<std::vector<int>> trained(R);
  for (size_t r = 0; r < R; ++r) {
    for (int l = 0; l < L; ++l)
      if ((*stacks[r])[l]->kind() != "softmax") {
        trained[r].push_back(l);
        jobs.push_back({r, l});
      }
    if (trained[r].empty())
      return make_error("attention transfer: every layer is kept full, nothing to train");
  }
  std::vector<std::unique_ptr<AdamW>> optimizers;
  for (size_t r = 0; r < R; ++r)
    optimizers.push_back(std::make_unique<AdamW>(trainable_parameters(*stacks[r]), options.adam));
  const long H = teacher.config.num_heads, D = teacher.config.head_dim;

  TrainLoop loop;
  loop.label = "transfer";
  loop.loss_name = "nmse";
  loop.tokens_per_step = (long)options.batch * T;
  loop.recipes = (int)R;
  loop.trained_layers = trained;
  loop.num_layers = L;
  loop.resume = [&]() -> Result<long> {
    long start = -1;
    for (size_t r = 0; r < R; ++r) {
      long resumed = 0;
      if (options.resume && !state_paths[r].empty() && file_exists(state_paths[r])) {
        GL_ASSIGN_OR_RETURN(resumed, train_state_load(state_paths[r], *stacks[r], *optimizers[r]));
        if (resumed > options.steps)
          return make_error(state_paths[r], ": resume state is at step ", resumed, " of a ", options.steps, "-step run");
      }
      if (start >= 0 && resumed != start)
        return make_error(state_paths[r], ": resume states of the recipes are at different steps");
      start = resumed;
    }
    return start;
  };
  loop.step = [&](long step, float lr) -> Result<std::vector<StepLoss>> {
    std::vector<std::vector<double>> step_nmse(R, std::vector<double>(L, 0.0));
    for (int b = 0; b < options.batch; ++b) {
      const long index = (step * options.batch + b) % data.size();
      ForwardTrace trace;
      trace.capture_mixer_io = true;
      model_forward(teacher, data.sequence(index), T, nullptr, false, &trace);
      // One job per core below: the students' BLAS calls stay on their thread (OpenBLAS's own
      // threads would oversubscribe the cores the jobs already occupy).
      const int blas_threads = openblas_get_num_threads();
      openblas_set_num_threads(1);
#pragma omp parallel for schedule(dynamic, 1)
      for (size_t i = 0; i < jobs.size(); ++i) {
        const auto [r, l] = jobs[i];
        const ForwardTrace::Layer& io = trace.layers[l];
        const mixers::MixerInputs in = io.inputs(T, teacher.inv_freq.data());
        std::vector<float> y((long)T * H * D), dy((long)T * H * D);
        (*stacks[r])[l]->forward(in, y.data());
        step_nmse[r][l] += nmse_loss(y.data(), io.y.data(), (long)y.size(), dy.data());
        // loss = mean over layers and over the batch of each layer's NMSE.
        const float scale = 1.0f / (float)(trained[r].size() * options.batch);
        for (float& g : dy) g *= scale;
        (*stacks[r])[l]->backward(in, dy.data(), {});
      }
      openblas_set_num_threads(blas_threads);
    }
    std::vector<StepLoss> losses(R);
    for (size_t r = 0; r < R; ++r) {
      apply_nan_fault(*stacks[r], options, step);
      losses[r].nonfinite_gradient_layer = first_nonfinite_gradient_layer(*stacks[r]);
      if (losses[r].nonfinite_gradient_layer < 0) optimizers[r]->step(lr);
      losses[r].layer_loss.assign(L, 0.0);
      double loss = 0.0;
      for (int l : trained[r]) {
        losses[r].layer_loss[l] = step_nmse[r][l] / options.batch;
        loss += step_nmse[r][l] / options.batch;
      }
      loss /= trained[r].size();
      losses[r].loss = loss;
    }
    return losses;
  };
  loop.save = [&](long steps_done) -> Status {
    for (size_t r = 0; r < R; ++r)
      if (!state_paths[r].empty())
        GL_TRY(train_state_save(state_paths[r], *stacks[r], *optimizers[r], steps_done));
    return ok_status();
  };
  return train_loop_run(options, loop);
}

}  // namespace golinear::train
