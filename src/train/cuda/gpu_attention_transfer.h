// Attention transfer (train/attention_transfer.h, the specification) on one GPU: the same
// options, schedule, loss and report. Per step and sequence, one teacher forward gives every
// layer's mixer inputs and teacher output on the device (bf16); every linearized layer then runs
// the GPU hybrid layer's training forward, its normalized MSE and backward
// (mixers/cuda/gpu_hybrid_layer.h); then the global gradient norm, clipping and AdamW over one
// flat fp32 buffer holding every layer's parameters.
//
// Resume checkpoints are the CPU trainer's (train_state_save/load: every parameter, the AdamW
// moments in the CPU parameter order, the step), so a run may stop on one device and resume on
// the other. Only the default recipe trains here (gpu_hybrid_check_recipe); other layers must be
// softmax (kept full).
#pragma once

#include <functional>
#include <vector>

#include "model/cuda/gpu_model.h"
#include "train/attention_transfer.h"

namespace golinear::train::cuda {

// Fills one trace per layer (device pointers, valid until the next call) for one sequence of
// T tokens from position 0.
using GpuTeacher =
    std::function<Status(const int32_t* tokens, int T, std::vector<golinear::cuda::GpuLayerTrace>* layers)>;

// The teacher as the CPU computes it (model_forward's trace, rounded to bf16 and uploaded):
// the reference for tests, independent of the GPU model.
Result<GpuTeacher> gpu_teacher_from_cpu(const Model& teacher);

// The teacher on the GPU (model/cuda/gpu_model.h, bf16): `teacher` uploaded once.
Result<GpuTeacher> gpu_teacher_from_model(const Model& teacher);

// Attention transfer with the given teacher trace; `teacher` supplies the config and RoPE
// frequencies. Same result fields as train::attention_transfer.
Result<TrainReport> gpu_attention_transfer(const GpuTeacher& trace, const Model& teacher,
                                           MixerStack& students, const PackedDataset& data,
                                           const TrainOptions& options);

}  // namespace golinear::train::cuda
