// The training losses on the GPU with their gradients: the attention-transfer loss (normalized
// MSE of a layer's output against the teacher's) and the distillation loss (per-token KL of the
// teacher's and the student's next-token distributions); and the next-token NLL of a forward
// (no gradient: the GPU layer sensitivity, analysis/cuda/analyze.h).
// CPU references: train/attention_transfer.cpp (nmse_loss), train/distillation.cpp
// (kl_distillation_loss). Gradient convention as in cuda_common.h: WRITTEN (=).
// Reductions run in fp64 and a fixed order: the same inputs give the same bits on every run.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_common.h"

namespace golinear::kernels::cuda {

// Scratch the NMSE kernels need (per-block partial sums).
size_t nmse_workspace_bytes();

// sums[0] = Σ (s − t)², sums[1] = Σ t² (fp64, fixed order) over n values; student fp32,
// teacher bf16. Then, when dy is given, dy (n) fp32 = scale · 2 (s − t) / max(Σt², 1e-12)
// (the gradient of scale · nmse). sums stay on the device (2 doubles).
Status nmse_loss_forward_backward(double* sums, float* dy, const float* student,
                                  const bf16* teacher, long n, float scale, void* workspace,
                                  size_t workspace_bytes, cudaStream_t stream);

// The last stage of nmse_loss_forward_backward, for fused variants that write their own
// partials (hybrid.h's hybrid_mix_nmse_forward): sums[0] = Σ_b partial[2b],
// sums[1] = Σ_b partial[2b + 1] over `blocks` pairs (fp64, fixed order).
Status nmse_partials_reduce(double* sums, const double* partial, int blocks,
                            cudaStream_t stream);

// Per token t of teacher / student logits (T, V) fp32: kl[t] (fp64) = KL(softmax(teacher_t) ‖
// softmax(student_t)) and, when dlogits is not null, dlogits (T, V) fp32 = (p_S − p_T) · scale
// (scale = 1/(T·batch) gives the gradient of the batch-mean of the per-sequence mean KL, as
// train/distillation.cpp). Numerically stable log-softmax, fp32 elements, fp64 row sums.
Status kl_rows_forward_backward(double* kl, float* dlogits, const float* teacher,
                                const float* student, int T, int V, float scale,
                                cudaStream_t stream);

// The next-token loss of a forward (the CPU reference: logprobs_of_next_tokens, model/
// transformer.h): nll[t] (fp64) = log Σ_v exp(logits[t, v]) − logits[t, ids[t + 1]] for t < T − 1,
// logits (T, V) fp32 and ids (T) on the device (NaN for an id outside [0, V)). Stable
// log-sum-exp, fp32 elements, fp64 row sums.
Status next_token_nll_rows(double* nll, const float* logits, const int32_t* ids, int T, int V,
                           cudaStream_t stream);

}  // namespace golinear::kernels::cuda
