// The one training loop of every trainer (CPU and GPU attention transfer, CPU and GPU
// end-to-end distillation): resume, the learning-rate schedule (warmup + cosine,
// learning_rate_at), the report's final loss over the tail of the run, resume checkpoints and
// interruptions (step_end), the progress bar, tokens/s and the TrainReport. A trainer fills in
// what one step computes (TrainLoop::step: the gradients of the step's sequences and the
// optimizer update) and how its state is restored and saved.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "model/transformer.h"
#include "train/optimizer.h"

namespace golinear::train {

// For tests: at step `step` (1-based; 0: never) the gradient of layer `layer`'s first mixer
// parameter becomes NaN, as a numeric blow-up would (every trainer; GPU: gpu_apply_nan_fault).
struct NanFault {
  long step = 0;
  int layer = -1;
};

struct TrainOptions {
  long steps = 100;
  int batch = 1;            // sequences per step
  float lr = 3e-3f;
  long warmup = 10;
  AdamWOptions adam;
  // GPU trainer (gpu_attention_transfer) only: per-stage milliseconds on stderr (CUDA events
  // between the stages; slower), and the teacher of the next sequence traced beside the students
  // of this one where the teacher can (false: synchronously, before them; same loss curve).
  bool profile = false;
  bool pipeline_teacher = true;
  long checkpoint_every = 0;  // steps between resume checkpoints (0: none)
  std::string state_path;     // where resume checkpoints go (train_state.safetensors)
  bool resume = false;
  long stop_after = 0;        // stop (as if interrupted) after this many steps (tests; 0: off)
  NanFault nan_fault;         // tests: a NaN gradient at a chosen step and layer
};

// options.nan_fault at step `step` (0-based): the gradient of that layer's first mixer parameter
// becomes NaN (nothing for a layer without parameters). CPU trainers, after the backward; the GPU
// trainers' twin is gpu_apply_nan_fault.
void apply_nan_fault(MixerStack& students, const TrainOptions& options, long step);

// The first layer whose mixer parameters in `students` (or LoRA adapters in `lora`, when given)
// hold a non-finite gradient (−1: none). Trainers call it between the backward and the optimizer
// update, and skip the update when it is ≥ 0 (StepLoss below).
int first_nonfinite_gradient_layer(MixerStack& students, LoraAdapters* lora = nullptr);

// What a trainer does after step `step` (0-based) of a run that began at step `start`: write the
// resume state (every checkpoint_every steps, and always after the last step, so that a resumed
// multi-stage run can skip a finished stage) and/or stop as an interruption would (stop_after).
// The report's final loss is the mean over the last tenth of the steps (at least one): steps from
// tail_start(o) on.
inline long tail_start(const TrainOptions& o) { return o.steps - std::max(1L, o.steps / 10); }

struct StepEnd {
  bool checkpoint = false, stop = false;
};
inline StepEnd step_end(const TrainOptions& o, long step, long start) {
  StepEnd e;
  e.stop = o.stop_after > 0 && step + 1 - start >= o.stop_after;
  e.checkpoint = (o.checkpoint_every > 0 && (step + 1) % o.checkpoint_every == 0) ||
                 step + 1 == o.steps || e.stop;
  return e;
}

struct TrainReport {
  long steps_done = 0;
  double tokens_per_s = 0;
  double seconds = 0;                 // wall time of this run's steps
  double final_loss = 0;              // mean over the last 10% of steps
  std::vector<double> layer_nmse;     // per layer, mean over the last 10% of steps (−1: not trained)
  std::vector<double> loss_curve;     // loss of every step
};

// StepLoss::nonfinite_gradient_layer when no one layer is to blame: every gradient was finite
// but their global norm was not (past FLT_MAX; GPU trainers, which learn it from the norm).
constexpr int kNonfiniteGradientNorm = -2;

// One recipe's loss at one step.
struct StepLoss {
  double loss = 0;                 // mean over the batch
  std::vector<double> layer_loss;  // (L) per layer, mean over the batch (read for trained layers)
  // ≥ 0: that layer's gradient was not finite, no update made; kNonfiniteGradientNorm: the
  // gradient norm was not, no update made; −1: finite.
  int nonfinite_gradient_layer = -1;
};

// What a trainer fills in. Several recipes may train in one loop (attention_transfer_many):
// one StepLoss and one TrainReport each.
struct TrainLoop {
  std::string label;                 // the progress bar's: "transfer", "distill (cuda)", …
  std::string loss_name;             // shown with the loss on the progress bar: "nmse", "kl"
  long tokens_per_step = 0;          // batch · T
  int recipes = 1;
  // Per recipe, the layers whose losses the report keeps (layer_nmse, L = num_layers); empty:
  // no per-layer losses.
  std::vector<std::vector<int>> trained_layers;
  int num_layers = 0;
  // Restores the resume state when there is one (TrainOptions::resume) and readies the trainer;
  // returns the step to start from (0 without a state). Called once, before the first step.
  std::function<Result<long>()> resume;
  // Step `step` (0-based): every sequence of the step, then the optimizer update at `lr`.
  // Returns one StepLoss per recipe.
  std::function<Result<std::vector<StepLoss>>(long step, float lr)> step;
  // Writes the resume state after `steps_done` steps (at checkpoints; may be empty).
  std::function<Status(long steps_done)> save;
  // After the last step, before the clock stops (e.g. waiting for the device; may be empty).
  std::function<Status()> finish;
};

// Runs steps start … options.steps − 1 (or until options.stop_after), one report per recipe. A
// step whose gradient or loss is not finite ends the run with one line naming the step, the
// layer (the first with a non-finite gradient, or loss when per-layer losses exist) and the last
// good checkpoint, which stays as it is (nothing is saved after that step).
Result<std::vector<TrainReport>> train_loop_run(const TrainOptions& options, const TrainLoop& loop);

}  // namespace golinear::train
