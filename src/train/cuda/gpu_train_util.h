// What the GPU trainers (attention transfer, end-to-end distillation) share: the map between the
// CPU AdamW's flat parameter order and the device buffer, the device AdamW, resume states.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "common/result.h"
#include "model/transformer.h"
#include "train/attention_transfer.h"
#include "kernels/cuda/cuda_common.h"
#include "mixers/cuda/hybrid_mixer.h"
#include "model/cuda/lora.h"
#include "train/optimizer.h"

namespace golinear::train::cuda {

using kernels::cuda::CublasHandle;  // the resource owners (kernels/cuda/device_resources.h)
using kernels::cuda::CudaEvent;
using kernels::cuda::CudaStream;

// The layers a GPU trainer trains: every hybrid mixer of `students`, each of a recipe the GPU
// runs (hybrid_check_recipe) and all of one recipe but for their exact budgets (sinks, window:
// per-layer budgets), so that every layer has the same parameter block; the other layers must
// be softmax attention (kept full). `what` names the trainer in errors.
struct GpuTrainedLayers {
  std::vector<int> layers;
  mixers::MixerOptions recipe;                // the first trained layer's
  std::vector<mixers::MixerOptions> options;  // per trained layer (its sinks and window)
  // Scratch for the training forward and backward of any of the layers over T tokens.
  size_t scratch_bytes(const mixers::AttentionShape& shape, int T) const;
};
Result<GpuTrainedLayers> gpu_trained_layers(const MixerStack& students, const std::string& what);

// AdamW with global-norm clipping over one flat fp32 parameter buffer on the device
// (kernels/cuda/optimizer.h adamw_step): the moments m, v (zeroed by allocate) and the norm.
class GpuAdamW {
 public:
  Status allocate(long P);
  float* m() const { return m_.get(); }
  float* v() const { return v_.get(); }
  // One step (t: the step count after it) on value, grad (P); then each layer's bf16 gate
  // weights are refreshed from the new values.
  // A non-finite gradient norm changes nothing (kernels/cuda/optimizer.h): read it back with
  // norm() and stop.
  Status step(float* value, float* grad, float lr, const AdamWOptions& o, long t,
              std::vector<mixers::cuda::GpuHybridMixer>& layers, cudaStream_t stream);
  // The gradient norm of the last step (before clipping); waits for `stream`.
  Result<float> norm(cudaStream_t stream) const;

 private:
  long P_ = 0;
  kernels::cuda::DeviceBuffer<float> m_, v_, norm_;
  kernels::cuda::DeviceBuffer<char> norm_ws_;
};

// Where one trained tensor sits in the CPU AdamW's flat order and in the device buffer.
struct FlatPiece {
  long cpu_offset, gpu_offset, count;
};

// The CPU AdamW flattens trainable_parameters(students) in order (layers, then each mixer's
// parameters()); the device buffer holds each trained layer's hybrid_layout block, layer
// trained[i] at i · per_layer. `what` names the trainer in errors.
Result<std::vector<FlatPiece>> flat_pieces(MixerStack& students, const std::vector<int>& trained,
                                           long per_layer, const std::string& what);

// --resume: when options.state_path holds a state, loads it into `students` (and `lora`) and `cpu_optimizer`
// (the CPU trainer's format) and copies its AdamW moments into the device buffers m, v (P floats
// each, the GPU layout); returns the step to continue from (0 without a state).
Result<long> gpu_train_resume(const TrainOptions& options, MixerStack& students, AdamW& cpu_optimizer,
                              const std::vector<FlatPiece>& pieces, long P, float* m, float* v,
                              LoraAdapters* lora = nullptr);

// Writes the resume state at `step`: the students (and `lora`) must hold the current values (downloaded);
// the AdamW moments come from the device buffers m, v and its step count is adam_t.
Status gpu_train_save(const TrainOptions& options, MixerStack& students, AdamW& cpu_optimizer,
                      const std::vector<FlatPiece>& pieces, long P, const float* m, const float* v,
                      long adam_t, long step, LoraAdapters* lora = nullptr);

// options.nan_fault on the device: at step `step` (0-based) the gradient of layer fault.layer's
// first mixer parameter becomes NaN in `grad` (the flat buffer `pieces` maps), as apply_nan_fault
// makes it on the CPU; nothing when that layer is not trained.
Status gpu_apply_nan_fault(const TrainOptions& options, long step, MixerStack& students,
                           const std::vector<FlatPiece>& pieces, float* grad, cudaStream_t stream);

// After a step whose gradient norm was not finite (GpuAdamW::step then changed nothing): the
// first layer holding a non-finite gradient, found by first_nonfinite_gradient_layer over the device
// gradients copied into the CPU mixers (and adapters), or kNonfiniteGradientNorm when every
// gradient is finite (the norm overflowed).
Result<int> gpu_nonfinite_gradient_layer(const std::vector<mixers::cuda::GpuHybridMixer>& layers,
                                         const std::vector<int>& trained, MixerStack& students,
                                         const golinear::model::cuda::GpuLora* gpu_lora,
                                         LoraAdapters* lora, cudaStream_t stream);

}  // namespace golinear::train::cuda
