#include "train/train_loop.h"

#include <chrono>
#include <cmath>

#include "common/progress.h"

namespace golinear::train {

void apply_nan_fault(MixerStack& students, const TrainOptions& options, long step) {
  const NanFault& fault = options.nan_fault;
  if (fault.step != step + 1 || fault.layer < 0 || fault.layer >= (int)students.size()) return;
  std::vector<mixers::Parameter*> params = students[fault.layer]->parameters();
  if (!params.empty() && !params[0]->grad.empty()) params[0]->grad[0] = std::nanf("");
}

int first_nonfinite_gradient_layer(MixerStack& students, LoraAdapters* lora) {
  auto finite = [](const std::vector<mixers::Parameter*>& params) {
    for (const mixers::Parameter* p : params)
      for (float g : p->grad)
        if (!std::isfinite(g)) return false;
    return true;
  };
  for (size_t l = 0; l < students.size(); ++l) {
    if (!finite(students[l]->parameters())) return (int)l;
    if (lora && l < lora->layers.size() && !finite(lora->layers[l].parameters())) return (int)l;
  }
  return -1;
}

Result<std::vector<TrainReport>> train_loop_run(const TrainOptions& options, const TrainLoop& loop) {
  const size_t R = (size_t)loop.recipes;
  const bool per_layer = !loop.trained_layers.empty();
  if (per_layer && loop.trained_layers.size() != R)
    return make_error("training loop: one list of trained layers per recipe expected");
  long start = 0;
  if (loop.resume) {
    GL_ASSIGN_OR_RETURN(start, loop.resume());
  }
  std::vector<TrainReport> reports(R);
  std::vector<std::vector<double>> layer_sum(R, std::vector<double>(per_layer ? loop.num_layers : 0, 0.0));
  for (auto& report : reports) {
    report.steps_done = start;
    if (per_layer) report.layer_nmse.assign(loop.num_layers, -1.0);
  }
  // The last good checkpoint: the resumed state, then each one saved.
  long last_saved = start;
  auto kept_checkpoint = [&](long saved) {
    if (!loop.save || saved == 0) return std::string("no checkpoint was written before it");
    if (options.state_path.empty()) return str_cat("the last good checkpoint, step ", saved, ", is kept");
    return str_cat("the last good checkpoint, step ", saved, ", is kept in ", options.state_path);
  };
  long tail_steps = 0;
  const long tail_from = tail_start(options);
  ProgressBar bar(loop.label, options.steps);
  const auto t0 = std::chrono::steady_clock::now();
  long tokens_this_run = 0;
  for (long step = start; step < options.steps; ++step) {
    const float lr = learning_rate_at(step, options.steps, options.warmup, options.lr);
    GL_ASSIGN_OR_RETURN(std::vector<StepLoss> losses, loop.step(step, lr));
    if (losses.size() != R) return make_error("training loop: one loss per recipe expected");
    tokens_this_run += loop.tokens_per_step;
    const bool tail = step >= tail_from;
    tail_steps += tail;
    double mean_loss = 0.0;
    for (size_t r = 0; r < R; ++r) {
      // Stop before a non-finite gradient or loss is checkpointed or reported.
      const double loss = losses[r].loss;
      const std::string recipe = R > 1 ? str_cat(" (recipe ", r, ")") : "";
      if (losses[r].nonfinite_gradient_layer >= 0)
        return make_error(loop.label, ": the gradient of layer ", losses[r].nonfinite_gradient_layer,
                          recipe, " became non-finite at step ", step + 1, " (",
                          loop.loss_name, " ", loss, "); ", kept_checkpoint(last_saved));
      if (losses[r].nonfinite_gradient_layer == kNonfiniteGradientNorm)
        return make_error(loop.label, ": the gradient norm", recipe, " overflowed at step ", step + 1,
                          " (every gradient finite, ", loop.loss_name, " ", loss, "); ",
                          kept_checkpoint(last_saved));
      if (!std::isfinite(loss)) {
        int layer = -1;
        if (per_layer && (int)losses[r].layer_loss.size() == loop.num_layers)
          for (int l : loop.trained_layers[r])
            if (layer < 0 && !std::isfinite(losses[r].layer_loss[l])) layer = l;
        return make_error(loop.label, ": the ", loop.loss_name,
                          layer >= 0 ? str_cat(" of layer ", layer) : std::string(), recipe,
                          " became ", loss, " at step ", step + 1, "; ", kept_checkpoint(last_saved));
      }
      mean_loss += loss / R;
      reports[r].loss_curve.push_back(loss);
      reports[r].steps_done = step + 1;
      if (tail) {
        reports[r].final_loss += loss;
        if (per_layer && (int)losses[r].layer_loss.size() == loop.num_layers)
          for (int l : loop.trained_layers[r]) layer_sum[r][l] += losses[r].layer_loss[l];
      }
    }
    bar.update(step + 1, (double)tokens_this_run,
               str_cat(R > 1 ? "mean " : "", loop.loss_name, " ", std::to_string(mean_loss).substr(0, 6),
                       " · lr ", lr));
    const StepEnd end = step_end(options, step, start);
    if (end.checkpoint && loop.save) {
      // A checkpoint that cannot be written (full disk, unwritable directory) leaves the one
      // before it in place (writes go to a temporary, then a rename).
      if (Status saved = loop.save(step + 1); !saved.ok())
        return make_error(saved.error(), "; ", kept_checkpoint(last_saved));
      last_saved = step + 1;
    }
    if (end.stop) break;
  }
  if (loop.finish) GL_TRY(loop.finish());
  bar.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t r = 0; r < R; ++r) {
    reports[r].seconds = seconds;
    reports[r].tokens_per_s = seconds > 0 ? tokens_this_run / seconds : 0;
    if (tail_steps > 0) {
      reports[r].final_loss /= tail_steps;
      if (per_layer)
        for (int l : loop.trained_layers[r]) reports[r].layer_nmse[l] = layer_sum[r][l] / tail_steps;
    }
  }
  return reports;
}

}  // namespace golinear::train
