// Elementwise, layout and conversion helpers between the ops on the GPU: fp32 → bf16 (also as a
// hi + lo pair), adds, the q/k/v split of one fused projection (bias, Qwen3's per-head norm) and
// the packing of its gradient, and argmax over rows (greedy decoding).
// Layouts row-major, time first; letters as in docs/STYLE.md.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_common.h"

namespace golinear::kernels::cuda {

Status convert_f32_to_bf16(bf16* out, const float* in, long n, cudaStream_t stream);
// a (n) fp32 += b (n) fp32.
Status add_f32(float* a, const float* b, long n, cudaStream_t stream);
// x (n) fp32 → hi = bf16(x), lo = bf16(x − hi): hi + lo holds x to about 2^-16 relative (two
// bf16 GEMMs then give an fp32-accurate product with bf16 tensor cores).
Status split_f32_to_bf16_pair(bf16* hi, bf16* lo, const float* x, long n, cudaStream_t stream);

// x (T, N) fp32 += b (N).
Status add_bias_rows(float* x, const float* b, int T, int N, cudaStream_t stream);

// Splits qkv (T, H·D + 2·G·D) fp32 (one GEMM of [q_proj; k_proj; v_proj]) into q (T, H, D),
// k, v (T, G, D) bf16, adding bias (H·D + 2·G·D, or null) and, when q_norm/k_norm (D) are given,
// an RMSNorm over each q and k head (eps). D ≤ 256.
Status qkv_split(bf16* q, bf16* k, bf16* v, const float* qkv, const float* bias,
                 const float* q_norm, const float* k_norm, int T, int H, int G, int D, float eps,
                 cudaStream_t stream);

// dqkv (T, H·D + 2·G·D) bf16 = [dq | dk | dv] per row, from dq (T, H·D), dk, dv (T, G·D) fp32
// (the operand of the [q_proj; k_proj; v_proj] input-gradient GEMM).
Status pack_qkv_grad_bf16(bf16* dqkv, const float* dq, const float* dk, const float* dv, int T,
                          int HD, int GD, cudaStream_t stream);

// Sub-matrix copies with a scale (LoRA's operands and gradients, model/cuda/lora.h):
// dst rows [0, R) × cols [0, N) with row stride ld_dst (bf16) = bf16(scale · src (R, N) fp32);
Status scaled_block_to_bf16(bf16* dst, int ld_dst, const float* src, int R, int N, float scale,
                            cudaStream_t stream);
// dst (R, N) fp32 += scale · src rows [0, R) × cols [0, N) with row stride ld_src (fp32).
Status add_scaled_block_f32(float* dst, const float* src, int ld_src, int R, int N, float scale,
                            cudaStream_t stream);

// out[r] = argmax of row r of x (R, V) fp32 (the first maximum).
Status argmax_rows(int32_t* out, const float* x, int R, int V, cudaStream_t stream);

}  // namespace golinear::kernels::cuda
