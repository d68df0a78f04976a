// The hybrid-specific kernels that training the hybrid mixer on the GPU needs besides hybrid.h,
// attention.h, gated_delta.h and the generic families (short_conv.h, rope.h, norm.h, loss.h,
// optimizer.h, elementwise.h): the gates' backward, the mix gate and its backward, and the mix
// gate fused with the attention-transfer loss. Same math as mixers/hybrid_mixer.cpp and
// train/attention_transfer.cpp (the specification).
//
// Gradient convention as in cuda_common.h: WRITTEN (=) unless the comment says "+=".
// Reductions (loss sums, per-head parameter gradients) run in a fixed order:
// the same inputs give the same bits on every run.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_common.h"

namespace golinear::kernels::cuda {

// ---- gates ---------------------------------------------------------------------------------

// Backward of hybrid_gates_forward (kernels/cuda/hybrid.h). dg, dbeta (T, H) fp32 are the gradients of g and β;
// dlogits (T, 3H) fp32: its λ columns [2H, 3H) hold ∂/∂(λ-logit) on entry (mix_gate_backward
// writes them) and stay; the a, b columns are WRITTEN. dA_log, ddt_bias, db_beta, db_lambda (H)
// fp32 += (sums over T in order, one block per head).
Status hybrid_gates_backward(float* dlogits, float* dA_log, float* ddt_bias, float* db_beta,
                             float* db_lambda, const float* dg, const float* dbeta,
                             const float* logits, const float* g, const float* beta,
                             const float* A_log, const float* dt_bias, int T, int H,
                             cudaStream_t stream);

// ---- mixing (gate) -------------------------------------------------------------------------

// y (T, H, D) fp32 = (1 − λ) y_exact + λ y_lin; y_exact, y_lin bf16, lambda (T, H).
Status mix_gate_forward_f32(float* y, const bf16* y_exact, const bf16* y_lin, const float* lambda,
                            int T, int H, int D, cudaStream_t stream);

// From dy (T, H, D) fp32: dy_exact (T, H, D) fp32 = (1 − λ) dy; dy_lin (T, H, D) bf16 = λ dy
// (the GDN backward reads bf16); the λ columns of dlogits (T, 3H) = Σ_d dy (y_lin − y_exact)·λ(1 − λ).
Status mix_gate_backward(float* dy_exact, bf16* dy_lin, float* dlogits, const float* dy,
                         const bf16* y_exact, const bf16* y_lin, const float* lambda, int T, int H,
                         int D, cudaStream_t stream);

// The mix gate fused with the attention-transfer loss (no y or dy buffer): for
// y = (1 − λ) y_exact + λ y_lin (fp32, the arithmetic of mix_gate_forward_f32) against the bf16
// teacher (T, H, D), sums[0] = Σ (y − t)², sums[1] = Σ t² as nmse_loss_forward_backward
// (workspace: nmse_workspace_bytes).
Status mix_gate_nmse_forward(double* sums, const bf16* y_exact, const bf16* y_lin,
                             const float* lambda, const bf16* teacher, int T, int H, int D,
                             void* workspace, size_t workspace_bytes, cudaStream_t stream);
// mix_gate_backward of dy = scale · 2 (y − t) / max(sums[1], 1e-12) (nmse_loss_forward_backward's
// gradient) with y recomputed as above: the same values as the unfused kernels.
Status mix_gate_nmse_backward(float* dy_exact, bf16* dy_lin, float* dlogits, const double* sums,
                              float scale, const bf16* teacher, const bf16* y_exact,
                              const bf16* y_lin, const float* lambda, int T, int H, int D,
                              cudaStream_t stream);

}  // namespace golinear::kernels::cuda
