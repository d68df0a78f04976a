// Attention transfer (train/attention_transfer.h, the specification) on one GPU: the same
// options, schedule, loss and report. Per step and sequence, one teacher forward gives every
// layer's mixer inputs and teacher output on the device (bf16); every linearized layer then runs
// the GPU hybrid layer's training forward, its normalized MSE and backward
// (mixers/cuda/hybrid_mixer.h); then the global gradient norm, clipping and AdamW over one
// flat fp32 buffer holding every layer's parameters.
//
// Resume checkpoints are the CPU trainer's (train_state_save/load: every parameter, the AdamW
// moments in the CPU parameter order, the step), so a run may stop on one device and resume on
// the other. Every recipe the GPU hybrid mixer runs trains here (hybrid_check_recipe); other layers must be
// softmax (kept full).
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <type_traits>
#include <vector>

#include "model/cuda/gpu_model.h"
#include "train/attention_transfer.h"

namespace golinear::train::cuda {

// Fills one trace per layer (device pointers, valid until the next call) for one sequence of
// T tokens from position 0.
using GpuTraceFn =
    std::function<Status(const int32_t* tokens, int T, std::vector<golinear::model::cuda::GpuLayerTrace>* layers)>;
// The pipelined form (golinear::model::cuda::gpu_model_trace_async): enqueues the trace into `slot`
// (0 or 1) behind the event `wait` (or null), records `done` when written, returns at once.
using GpuTraceAsyncFn =
    std::function<Status(const int32_t* tokens, int T, int slot, cudaEvent_t wait, cudaEvent_t done,
                         std::vector<golinear::model::cuda::GpuLayerTrace>* layers)>;

// A teacher: the synchronous trace, and optionally the pipelined one, with which the trainer
// runs the teacher of the next sequence on the teacher's stream while the students of this one
// train (the default; TrainOptions::pipeline_teacher = false turns it off: see
// gpu_attention_transfer.cpp).
class GpuTeacher {
 public:
  GpuTeacher() = default;
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, GpuTeacher> &&
                                              std::is_constructible_v<GpuTraceFn, F>>>
  GpuTeacher(F trace) : trace_(std::move(trace)) {}  // a plain trace function converts
  GpuTeacher(GpuTraceFn trace, GpuTraceAsyncFn trace_async)
      : trace_(std::move(trace)), trace_async_(std::move(trace_async)) {}
  Status operator()(const int32_t* tokens, int T,
                    std::vector<golinear::model::cuda::GpuLayerTrace>* layers) const {
    return trace_(tokens, T, layers);
  }
  const GpuTraceAsyncFn& async() const { return trace_async_; }  // empty: not pipelined

 private:
  GpuTraceFn trace_;
  GpuTraceAsyncFn trace_async_;
};

// The teacher as the CPU computes it (model_forward's trace, rounded to bf16 and uploaded):
// the reference for tests, independent of the GPU model.
Result<GpuTeacher> gpu_teacher_from_cpu(const Model& teacher);

// The teacher on the GPU (model/cuda/gpu_model.h, bf16): `teacher` uploaded once. Pipelined.
Result<GpuTeacher> gpu_teacher_from_model(const Model& teacher);
// A model already on the GPU (e.g. gpu_model_random) as the teacher, pipelined.
GpuTeacher gpu_teacher_from_gpu_model(std::shared_ptr<golinear::model::cuda::GpuModel> model);

// Attention transfer with the given teacher trace; `teacher` supplies the config and RoPE
// frequencies. Same result fields as train::attention_transfer.
Result<TrainReport> gpu_attention_transfer(const GpuTeacher& trace, const Model& teacher,
                                           MixerStack& students, const PackedDataset& data,
                                           const TrainOptions& options);

}  // namespace golinear::train::cuda
