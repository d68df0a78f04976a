// End-to-end distillation (DESIGN.md §4 stage 2; train/distillation.h is the specification) on
// one GPU. It orchestrates the GPU boxes below it; per step and sequence:
//   1 the teacher's logits: GpuModel::forward_device of the frozen backbone with every layer
//     softmax attention (model/cuda/gpu_model.h: bf16 weights, fp32 residual);
//   2 the student's logits: the same forward with the trained layers' GPU mixers attached
//     (mixers/cuda/hybrid_mixer.h; layers kept full stay softmax), keeping every layer's
//     activations (GpuActivations: residual fp32, norms/q/k/v/y/[gate;up] bf16, the softmax lse);
//   3 KL(teacher ‖ student) per token (fp32 logits, stable log-softmax, fp64 sums), its gradient
//     (p_S − p_T)/(T·batch), and the backward of the frozen network (model/cuda/
//     transformer_backward.h), which calls each trained mixer's backward (its intermediates
//     recomputed by its training forward, one shared scratch); the mixers' parameter gradients
//     accumulate in one flat fp32 buffer;
//   4 global-norm clipping and AdamW over that buffer (kernels/cuda/optimizer.h).
// Memory: every layer's activations of one sequence are kept (no recomputation of the
// backbone): ≈ T·(10C + 4F + 10·H·D) bytes per layer plus 3 (T, V) fp32 logit-sized buffers —
// for Llama-3.1-8B at T = 4096 about 17 + 6 GB beside the 15 GB of weights.
//
// Same TrainOptions / TrainReport / resume checkpoints (train_state_save/load: every parameter,
// the AdamW moments in the CPU order, the step) as train::distill_end_to_end, so a run may stop
// on one device and resume on the other. Every recipe the GPU hybrid mixer runs trains here
// (hybrid_check_recipe); other student layers must be softmax (kept full); the teacher's
// mixers must all be softmax attention.
#pragma once

#include <cstdint>
#include <memory>

#include "model/cuda/gpu_model.h"
#include "model/transformer.h"
#include "train/attention_transfer.h"
#include "io/packed_dataset.h"

namespace golinear::train::cuda {

// Trains `students` (and `lora`, the student's LoRA adapters on q/k/v/o, or null) end to end
// against `model` (the teacher: its own mixers, all softmax, no adapters). The trained parameters
// are written back into the students' CPU mixers (and `lora`).
// `backbone`: the teacher already on the GPU (e.g. loaded by gpu_model_load, shared with the
// attention-transfer stage; every layer softmax), or null: `model`'s weights are uploaded (the
// host model must then hold them).
Result<TrainReport> gpu_distill_end_to_end(const Model& model, MixerStack& students,
                                           const PackedDataset& data, const TrainOptions& options,
                                           std::shared_ptr<golinear::model::cuda::GpuModel> backbone = nullptr,
                                           LoraAdapters* lora = nullptr);

// One sequence of the step above without the optimizer (the GPU counterpart of
// train::distill_sequence_gradient, for tests): returns the KL (mean over the T tokens) and sets
// (=) every trained student parameter's CPU .grad (and `lora`'s) to scale · ∂KL/∂θ.
Result<double> gpu_distill_sequence_gradient(const Model& model, MixerStack& students,
                                             const int32_t* ids, int T, float scale,
                                             LoraAdapters* lora = nullptr);

}  // namespace golinear::train::cuda
