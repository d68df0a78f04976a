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

// The hybrid-specific gates and mixing (forward, backward, fused with the loss) are declared in
// hybrid.h.

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
