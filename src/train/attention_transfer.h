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
#include "train/train_loop.h"

namespace golinear::train {

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

// Resume checkpoints: every mixer parameter (and LoRA parameter, when `lora` is given), the
// optimizer moments and the step.
Status train_state_save(const std::string& path, MixerStack& students, AdamW& optimizer, long step,
                        LoraAdapters* lora = nullptr);
Result<long> train_state_load(const std::string& path, MixerStack& students, AdamW& optimizer,
                              LoraAdapters* lora = nullptr);

std::vector<mixers::Parameter*> trainable_parameters(MixerStack& students);

}  // namespace golinear::train
