// End-to-end distillation (DESIGN.md §4 stage 2; train/distillation.h is the specification) on
// one GPU. Per step and sequence:
//   1 the teacher's logits: the backbone with every layer softmax attention (bf16 weights, fp32
//     residual, as model/cuda/gpu_model.h);
//   2 the student's forward through the same backbone with the linearized layers' mixers
//     (mixers/cuda/gpu_hybrid_layer.h; layers kept full stay softmax), keeping every layer's
//     activations (residual fp32, norms/q/k/v/y/[gate;up] bf16, the softmax lse); the hybrid
//     mixer's own intermediates are recomputed in the backward (one shared scratch);
//   3 KL(teacher ‖ student) per token (fp32 logits, stable log-softmax, fp64 sums), its gradient
//     (p_S − p_T)/(T·batch), and the backward from the top: lm_head (input gradient only), final
//     norm, per layer SwiGLU MLP, o_proj, the mixer (hybrid: its backward with input gradients;
//     softmax: attention_backward + RoPE's transpose), q/k norm (Qwen3), [q;k;v] projections,
//     input norm, residual; the mixers' parameter gradients accumulate in one flat fp32 buffer;
//   4 global-norm clipping and AdamW over that buffer (kernels/cuda/optimizer.h).
// The frozen weights' input-gradient GEMMs take bf16 operands (the gradient rounded to bf16),
// fp32 accumulation. Memory: every layer's activations of one sequence are kept (no
// recomputation of the backbone): ≈ T·(10C + 4F + 6·H·D) bytes per layer plus 4 (T, V) fp32
// logit-sized buffers — fine for the bundled models and T = 2048 (an 8B model at T = 2048 needs
// ≈ 12 GB); longer sequences of large models would want per-layer recomputation.
//
// Same TrainOptions / TrainReport / resume checkpoints (train_state_save/load: every parameter,
// the AdamW moments in the CPU order, the step) as train::distill_end_to_end, so a run may stop
// on one device and resume on the other. Only the default hybrid recipe trains here
// (gpu_hybrid_check_recipe); other student layers must be softmax (kept full); the teacher's
// mixers must all be softmax attention.
#pragma once

#include <cstdint>

#include "model/transformer.h"
#include "train/attention_transfer.h"
#include "train/dataset.h"

namespace golinear::train::cuda {

// Trains `students` end to end against `model` (the teacher: its own mixers, all softmax).
// The trained parameters are written back into the students' CPU mixers.
Result<TrainReport> gpu_distill_end_to_end(const Model& model, MixerStack& students,
                                           const PackedDataset& data, const TrainOptions& options);

// One sequence of the step above without the optimizer (the GPU counterpart of
// train::distill_sequence_gradient, for tests): returns the KL (mean over the T tokens) and sets
// (=) every trained student parameter's CPU .grad to scale · ∂KL/∂θ.
Result<double> gpu_distill_sequence_gradient(const Model& model, MixerStack& students,
                                             const int32_t* ids, int T, float scale);

}  // namespace golinear::train::cuda
