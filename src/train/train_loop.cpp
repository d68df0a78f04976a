#include "train/train_loop.h"

#include <chrono>
#include <cmath>

#include "common/progress.h"

namespace golinear::train {

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
      const double loss = losses[r].loss;
      if (!std::isfinite(loss))  // stop before a non-finite loss is checkpointed or reported
        return make_error(loop.label, ": the ", loop.loss_name, " became ", loss, " at step ",
                          step + 1);
      mean_loss += loss / R;
      reports[r].loss_curve.push_back(loss);
      reports[r].steps_done = step + 1;
      if (tail) {
        reports[r].final_loss += loss;
        if (per_layer)
          for (int l : loop.trained_layers[r]) layer_sum[r][l] += losses[r].layer_loss[l];
      }
    }
    bar.update(step + 1, (double)tokens_this_run,
               str_cat(R > 1 ? "mean " : "", loop.loss_name, " ", std::to_string(mean_loss).substr(0, 6),
                       " · lr ", lr));
    const StepEnd end = step_end(options, step, start);
    if (end.checkpoint && loop.save) GL_TRY(loop.save(step + 1));
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
