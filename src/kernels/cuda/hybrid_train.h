// The small kernels that training the hybrid mixer on the GPU needs besides the stages of
// hybrid.h, attention.h and gated_delta.h: the gate logits → g, β, λ and their backward, the mix
// gate and its backward, the normalized-MSE loss and its gradient, fp32 ↔ bf16 copies, RoPE's
// backward on fp32 gradients, and the optimizer over one flat fp32 parameter buffer (global
// gradient norm for clipping, AdamW step). Same math as mixers/hybrid_mixer.cpp and
// train/{attention_transfer,optimizer}.cpp (the specification).
//
// Gradient convention as in cuda_common.h: WRITTEN (=) unless the comment says "+=".
// Reductions (loss sums, gradient norm, per-head parameter gradients) run in a fixed order:
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

// ---- loss ----------------------------------------------------------------------------------

// Scratch the NMSE kernels need (per-block partial sums).
size_t nmse_workspace_bytes();

// sums[0] = Σ (s − t)², sums[1] = Σ t² (fp64, fixed order) over n values; student fp32,
// teacher bf16. Then, when dy is given, dy (n) fp32 = scale · 2 (s − t) / max(Σt², 1e-12)
// (the gradient of scale · nmse). sums stay on the device (2 doubles).
Status nmse_loss_forward_backward(double* sums, float* dy, const float* student,
                                  const bf16* teacher, long n, float scale, void* workspace,
                                  size_t workspace_bytes, cudaStream_t stream);

// ---- conversions and small helpers ---------------------------------------------------------

Status convert_f32_to_bf16(bf16* out, const float* in, long n, cudaStream_t stream);
// a (n) fp32 += b (n) fp32.
Status add_f32(float* a, const float* b, long n, cudaStream_t stream);
// x (n) fp32 → hi = bf16(x), lo = bf16(x − hi): hi + lo holds x to about 2^-16 relative (two
// bf16 GEMMs then give an fp32-accurate product with bf16 tensor cores).
Status split_f32_to_bf16_pair(bf16* hi, bf16* lo, const float* x, long n, cudaStream_t stream);

// RoPE's backward on fp32 gradients: dst (T, N, D) fp32 += rotation of src (T, N, D) fp32 by
// −θ (token t at position pos0 + t; the transpose of rope_apply's rotation).
Status rope_backward_add_f32(float* dst, const float* src, const float* inv_freq, int T, int N,
                             int D, long pos0, cudaStream_t stream);

// ---- optimizer over one flat fp32 buffer ---------------------------------------------------

size_t grad_norm_workspace_bytes();
// norm_out (1) fp32 on the device = ‖grad (n)‖₂ (fp64 partials, fixed order).
Status grad_norm(float* norm_out, const float* grad, long n, void* workspace,
                 size_t workspace_bytes, cudaStream_t stream);

struct AdamWStep {
  float lr = 0, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0;
  float clip_norm = 1.0f;  // ≤ 0: no clipping
  long t = 1;              // the step number after this step (bias corrections)
};

// train/optimizer.cpp's AdamW::step on the device: the clip factor from *norm (clip_norm /
// norm when norm > clip_norm and finite), then m, v, value updated; grad zeroed.
Status adamw_step(float* value, float* grad, float* m, float* v, long n, const float* norm,
                  const AdamWStep& step, cudaStream_t stream);

}  // namespace golinear::kernels::cuda
