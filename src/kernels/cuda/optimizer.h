// The optimizer on the GPU over one flat fp32 parameter buffer: the global gradient norm (for
// clipping) and the AdamW step. CPU reference: train/optimizer.cpp (AdamW::step).
// The norm's reduction runs in fp64 and a fixed order: the same inputs give the same bits.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/cuda_common.h"

namespace golinear::kernels::cuda {

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
// norm when norm > clip_norm), then m, v, value updated; grad zeroed. A non-finite *norm (a NaN
// or Inf gradient, or a norm past FLT_MAX) changes nothing — value, m, v and grad stay as they
// were — so the trainer can name the layer from grad and stop with the last good state (the CPU
// trainers check the gradients before AdamW::step instead: first_nonfinite_gradient_layer).
Status adamw_step(float* value, float* grad, float* m, float* v, long n, const float* norm,
                  const AdamWStep& step, cudaStream_t stream);

}  // namespace golinear::kernels::cuda
