// Rotary position embedding (NeoX half rotation) on the GPU: the (cos, sin) table, the in-place
// rotation of bf16 rows (forward, or backward with sign −1), and the backward on fp32 gradients.
// CPU reference: kernels/cpu/rope.h. Angles in fp32, (pos0 + t) · inv_freq[i], as the CPU.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_common.h"

namespace golinear::kernels::cuda {

// cs (T, D/2) = (cos, sin) of (pos0 + t) · inv_freq[i] (fp32 angle, as rope_apply).
Status rope_table(float2* cs, const float* inv_freq, int T, int D, long pos0, cudaStream_t stream);

// RoPE (NeoX half rotation) in place on x (T, N, D) bf16, token t at position pos0 + t; sign 1
// forward, −1 the backward (rotation by −θ). inv_freq (D/2) fp32 (llama3 scaling already in it).
Status rope_apply(bf16* x, const float* inv_freq, int T, int N, int D, long pos0, int sign,
                  cudaStream_t stream);

// The forward rotation with a position per row: row t of x (T, N, D) at positions[t] (device,
// T values): the decode step of B sequences, each at its own position.
Status rope_apply_at(bf16* x, const float* inv_freq, int T, int N, int D, const long* positions,
                     cudaStream_t stream);

// RoPE's backward on fp32 gradients: dst (T, N, D) fp32 += rotation of src (T, N, D) fp32 by
// −θ (token t at position pos0 + t; the transpose of rope_apply's rotation).
Status rope_backward_add_f32(float* dst, const float* src, const float* inv_freq, int T, int N,
                             int D, long pos0, cudaStream_t stream);

}  // namespace golinear::kernels::cuda
