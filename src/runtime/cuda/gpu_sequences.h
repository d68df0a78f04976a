// Sequences of the GPU model for runtime::generate and the generation tasks of eval: the prompt
// prefilled by one forward into the constant-size cache (model/cuda/gpu_model.h: golinear::model::cuda::gpu_prefill),
// then one token per step through the decode step (a replayed CUDA graph when every layer is
// hybrid), logits downloaded for the host's sampler.
#pragma once

#include "model/cuda/gpu_model.h"
#include "runtime/generate.h"

namespace golinear::runtime::cuda {

// `model` must outlive the sequences; one sequence at a time runs on its stream.
runtime::NewSequence gpu_sequences(golinear::model::cuda::GpuModel& model);

}  // namespace golinear::runtime::cuda
