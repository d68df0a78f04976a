// The small whole-model kernels around the mixers (model/cuda/gpu_model.h): embedding gather,
// RMSNorm from the fp32 residual stream, the q/k/v split with bias and per-head (Qwen3) norm,
// SwiGLU of a stacked [gate; up] projection, bias add, argmax, a cuBLAS GEMM that accumulates
// into the fp32 residual, and deterministic random fills (random-weight models of a given shape).
// CPU references: kernels/cpu/{norm,activation,linear}.h through model/transformer.cpp.
// Layouts row-major, time first; letters as in docs/STYLE.md (T time, C hidden, F MLP, V vocab,
// H query heads, G kv heads, D head dim).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/hybrid.h"

namespace golinear::kernels::cuda {

// h (T, C) fp32 = embed[ids[t]] (embed (V, C) bf16, ids (T) int32 on the device).
Status embed_gather(float* h, const bf16* embed, const int32_t* ids, int T, int C,
                    cudaStream_t stream);

// out (N, C) bf16 = x / sqrt(mean x² + eps) · w; x (N, C) fp32, w (C) fp32.
Status rmsnorm_f32_forward(bf16* out, const float* x, const float* w, int N, int C, float eps,
                           cudaStream_t stream);

// Splits qkv (T, H·D + 2·G·D) fp32 (one GEMM of [q_proj; k_proj; v_proj]) into q (T, H, D),
// k, v (T, G, D) bf16, adding bias (H·D + 2·G·D, or null) and, when q_norm/k_norm (D) are given,
// an RMSNorm over each q and k head (eps). D ≤ 256.
Status qkv_split(bf16* q, bf16* k, bf16* v, const float* qkv, const float* bias,
                 const float* q_norm, const float* k_norm, int T, int H, int G, int D, float eps,
                 cudaStream_t stream);

// out (T, F) bf16 = silu(gu[:, :F]) ⊙ gu[:, F:]; gu (T, 2F) bf16.
Status swiglu_stacked(bf16* out, const bf16* gu, int T, int F, cudaStream_t stream);

// x (T, N) fp32 += b (N).
Status add_bias_rows(float* x, const float* b, int T, int N, cudaStream_t stream);

// out[r] = argmax of row r of x (R, V) fp32 (the first maximum).
Status argmax_rows(int32_t* out, const float* x, int R, int V, cudaStream_t stream);


// Deterministic fills (counter-based hash of (index, seed), the same on every device).
Status fill_normal_bf16(bf16* p, size_t n, uint64_t seed, float std, cudaStream_t stream);
Status fill_uniform_bf16(bf16* p, size_t n, uint64_t seed, float lo, float hi,
                         cudaStream_t stream);
Status fill_uniform_f32(float* p, size_t n, uint64_t seed, float lo, float hi,
                        cudaStream_t stream);
Status fill_const_f32(float* p, size_t n, float value, cudaStream_t stream);

}  // namespace golinear::kernels::cuda
