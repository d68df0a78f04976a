// The leave-one-layer-linearized sensitivity (analysis/analyze.h layer_sensitivity) with the
// model on one GPU: the same measurement (analysis::layer_sensitivity's SequenceNll and
// LayerMixerSwap), each forward GpuModel::forward_device in bf16 with the next-token NLL reduced
// on the device (kernels/cuda/loss.h next_token_nll_rows), a student's layer uploaded as the
// layer's mixer (GpuModel::set_layer_mixer) and set back to softmax attention after its forward.
// `golinear linearize --device cuda --window-by sensitivity` measures its probe with it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "analysis/analyze.h"
#include "model/cuda/gpu_model.h"

namespace golinear::analysis::cuda {

// The GPU model's SequenceNll (its mixers as they stand; no LoRA adapters may be attached);
// `model` must outlive it.
analysis::SequenceNll gpu_sequence_nll(golinear::model::cuda::GpuModel& model);

// analysis::layer_sensitivity of `student` against `teacher` on the GPU: `teacher` must be the
// base (every layer softmax attention, no LoRA adapters) and is so again on return; each layer
// `student` linearizes must be a hybrid mixer of a recipe the GPU runs. `teacher_ppl` as there (a
// finite value is the known teacher perplexity, else it receives the one measured). Forwards: the
// linearized layers (+1 for the teacher), N sequences each; `step` (may be empty) after each.
Result<std::vector<double>> layer_sensitivity(golinear::model::cuda::GpuModel& teacher,
                                              MixerStack& student, const int32_t* tokens, long N,
                                              int T, double* teacher_ppl = nullptr,
                                              const std::function<void()>& step = {});

}  // namespace golinear::analysis::cuda
