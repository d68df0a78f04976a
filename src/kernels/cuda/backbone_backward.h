// The backward of the frozen backbone on the GPU, for end-to-end distillation (DESIGN.md §4
// stage 2, train/cuda/gpu_distillation.h): input gradients only (the base weights receive none).
// CPU references: kernels/cpu/norm.h (rmsnorm_backward), kernels/cpu/activation.h
// (swiglu_backward), train/distillation.cpp (kl_distillation_loss), model/transformer_backward.cpp.
//
// Gradient convention as in cuda_common.h: WRITTEN (=) unless the comment says "+=".
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_common.h"

namespace golinear::kernels::cuda {

// RMSNorm's input gradient, y = x / sqrt(mean x² + eps) · w over rows of C:
//   dx = inv·dy·w − inv³/C · x · Σ_c dy_c w_c x_c,  inv = 1/sqrt(mean x² + eps)
// dx, dy, x (N, C) fp32, w (C) fp32. accumulate: dx += (else =). Row sums in fp64 like the CPU.
Status rmsnorm_backward_f32(float* dx, bool accumulate, const float* dy, const float* x,
                            const float* w, int N, int C, float eps, cudaStream_t stream);

// SwiGLU of a stacked [gate; up] row (T, 2F) bf16 (model_ops.h swiglu_stacked): from dact (T, F)
// fp32, dgu (T, 2F) bf16 = [dact·up·σ(g)(1 + g(1 − σ(g))) ; dact·silu(g)] (the GEMM operand).
Status swiglu_stacked_backward(bf16* dgu, const float* dact, const bf16* gu, int T, int F,
                               cudaStream_t stream);

// Per token t of teacher / student logits (T, V) fp32: kl[t] (fp64) = KL(softmax(teacher_t) ‖
// softmax(student_t)) and, when dlogits is not null, dlogits (T, V) fp32 = (p_S − p_T) · scale
// (scale = 1/(T·batch) gives the gradient of the batch-mean of the per-sequence mean KL, as
// train/distillation.cpp). Numerically stable log-softmax, fp32 elements, fp64 row sums.
Status kl_rows_forward_backward(double* kl, float* dlogits, const float* teacher,
                                const float* student, int T, int V, float scale,
                                cudaStream_t stream);

// dqkv (T, H·D + 2·G·D) bf16 = [dq | dk | dv] per row, from dq (T, H·D), dk, dv (T, G·D) fp32
// (the operand of the [q_proj; k_proj; v_proj] input-gradient GEMM).
Status pack_qkv_grad_bf16(bf16* dqkv, const float* dq, const float* dk, const float* dv, int T,
                          int HD, int GD, cudaStream_t stream);

}  // namespace golinear::kernels::cuda
