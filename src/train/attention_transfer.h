// Stage 1 of DESIGN.md §4, attention transfer: one teacher forward gives every layer's mixer
// inputs (x, q, k, v) and the teacher's attention output y^T; each student mixer runs on the
// same inputs and is trained on its normalized MSE ‖y^S − y^T‖² / ‖y^T‖². The loss is the mean
// over the linearized layers. No gradient flows through the backbone; the layers train
// independently (in parallel), and only the mixers' parameters change.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "model/transformer.h"
#include "io/packed_dataset.h"
#include "train/optimizer.h"

namespace golinear::train {

struct TrainOptions {
  long steps = 100;
  int batch = 1;            // sequences per step
  float lr = 3e-3f;
  long warmup = 10;
  AdamWOptions adam;
  long checkpoint_every = 0;  // steps between resume checkpoints (0: none)
  std::string state_path;     // where resume checkpoints go (train_state.safetensors)
  bool resume = false;
  long stop_after = 0;        // stop (as if interrupted) after this many steps (tests; 0: off)
};

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
  double final_loss = 0;              // mean over the last 10% of steps
  std::vector<double> layer_nmse;     // per layer, mean over the last 10% of steps (−1: not trained)
  std::vector<double> loss_curve;     // loss of every step
};

// Normalized MSE of y^S against y^T over n values: Σ(s − t)² / Σt²; fills dy = ∂nmse/∂s.
double nmse_loss(const float* student, const float* teacher, long n, float* dy);

// Trains the students (softmax layers are left alone) against `teacher`'s own mixers.
Result<TrainReport> attention_transfer(const Model& teacher, MixerStack& students,
                                       const PackedDataset& data, const TrainOptions& options);

// Several recipes trained at once against one teacher forward per sequence (the teacher pass is
// shared; each recipe keeps its own optimizer and resume state, state_paths[r], "" for none).
// Each recipe's result equals what attention_transfer would give it alone.
Result<std::vector<TrainReport>> attention_transfer_many(
    const Model& teacher, const std::vector<MixerStack*>& stacks, const PackedDataset& data,
    const TrainOptions& options, const std::vector<std::string>& state_paths);

// Resume checkpoints: every mixer parameter, the optimizer moments and the step.
Status train_state_save(const std::string& path, MixerStack& students, AdamW& optimizer, long step);
Result<long> train_state_load(const std::string& path, MixerStack& students, AdamW& optimizer);

std::vector<mixers::Parameter*> trainable_parameters(MixerStack& students);

}  // namespace golinear::train
