// Stage 2 of DESIGN.md §4, end-to-end distillation: the student (the model with its mixers
// replaced) is trained on KL(teacher ‖ student) over next-token distributions, with the
// gradient flowing back through the frozen network (model/transformer_backward.h) into the
// mixers' parameters. Only the new parameters are updated.
#pragma once

#include "train/attention_transfer.h"

namespace golinear::train {

// mean over t of KL(softmax(teacher_t) ‖ softmax(student_t)) for logits (T, V); fills
// dlogits (T, V) = ∂loss/∂student_logits = (p_S − p_T) / T when non-null.
double kl_distillation_loss(const float* teacher_logits, const float* student_logits, int T, int V,
                            float* dlogits);

// The student is the backbone with the `students` mixers and, when `lora` is given, its LoRA
// adapters on q/k/v/o (model/lora.h), trained together; the teacher is `model` as it is (its
// mixers, no LoRA: model.lora must be empty).

// One sequence of distill_end_to_end's step: teacher and student logits for ids (T), the KL
// (returned, mean over tokens) and the student's parameter gradients += scale · ∂KL/∂θ
// (scale = 1/batch in training). `model` holds the teacher's mixers (restored on return). The
// reference of the GPU trainer's gradient (train/cuda/gpu_distillation.h). `scratch` (the three
// (T, V) logit buffers) may be kept across calls so that a training loop allocates them once.
struct DistillScratch {
  std::vector<float> teacher_logits, student_logits, dlogits;
};
double distill_sequence_gradient(Model& model, MixerStack& students, const int32_t* ids, int T,
                                 float scale, LoraAdapters* lora = nullptr,
                                 DistillScratch* scratch = nullptr);

// Trains `students` (and `lora`) end to end; `model` holds the teacher's mixers (restored on
// return).
Result<TrainReport> distill_end_to_end(Model& model, MixerStack& students, const PackedDataset& data,
                                       const TrainOptions& options, LoraAdapters* lora = nullptr);

// The parameters the end-to-end stage trains: the mixers', then the LoRA adapters' (if any).
std::vector<mixers::Parameter*> distillation_parameters(MixerStack& students, LoraAdapters* lora);

}  // namespace golinear::train
