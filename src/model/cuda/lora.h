// The LoRA adapters of model/lora.h on the GPU, unmerged: the frozen bf16 weights stay as loaded
// and each adapted layer adds s·(x Aᵀ) Bᵀ by two thin GEMMs (rank r ≤ 64: ~2r/C of the
// projection's FLOPs). Merging (W + s·B A rounded to bf16) would lose most of a small delta: a
// bf16 weight keeps 8 bits, and |s·B A| is typically far below half an ulp of |W|.
//
// Device layout, per adapted layer:
//   fp32 master values (and gradients) in one flat buffer, the layer's block in the order of
//   LoraLayer::parameters() (per target q, k, v, o: A (r, in), then B (out, r)) — the CPU
//   optimizer's order, so resume states are shared with the CPU trainer;
//   bf16 GEMM operands rebuilt from them by refresh():
//     a_qkv (3r, C)             [A_q; A_k; A_v] (rows of a target not adapted are 0),
//     b_qkv (H·D + 2·G·D, 3r)   block diagonal s·B_q, s·B_k, s·B_v, so that one GEMM adds all
//                               three deltas into the fused [q; k; v] projection's output,
//     a_o (r, H·D), b_o (C, r)  A_o and s·B_o.
// Gradient convention: parameter gradients += (fp32), input gradients += .
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/device_resources.h"
#include "model/transformer.h"

#include <cublas_v2.h>

namespace golinear::model::cuda {

using kernels::cuda::bf16;

struct GpuLoraLayer {
  bool adapted = false;
  bool has_qkv = false, has_o = false;
  // Offsets of A_t, B_t in the flat buffers (−1: target t not adapted).
  std::array<long, kLoraTargets> offset_a{-1, -1, -1, -1}, offset_b{-1, -1, -1, -1};
  bf16* a_qkv = nullptr;  // (3r, C)
  bf16* b_qkv = nullptr;  // (H·D + 2·G·D, 3r)
  bf16* a_o = nullptr;    // (r, H·D)
  bf16* b_o = nullptr;    // (C, r)
};

// Working memory of the adapters' backward for T tokens.
struct GpuLoraScratch {
  bf16* u = nullptr;      // (T, 3r) x Aᵀ
  float* du = nullptr;    // (T, 3r)
  bf16* du_bf = nullptr;  // (T, 3r)
  float* dA = nullptr;    // (3r, max(C, H·D)) per-layer product before it is spread
  float* dB = nullptr;    // (max(H·D + 2·G·D, C), 3r)
  int T = 0;
};

class GpuLora {
 public:
  // Adapters shaped as `host` (options, adapted layers). value/grad: caller-owned flat buffers of
  // parameter_count(host) floats (grad may be null: inference), or value null: an own buffer.
  static Result<std::unique_ptr<GpuLora>> create(const ModelConfig& config, const LoraAdapters& host,
                                                 float* value, float* grad);
  // Floats of the flat buffer: every parameter of `host`.
  static long parameter_count(const LoraAdapters& host);

  int rank() const { return r_; }
  float scale() const { return s_; }
  int num_layers() const { return (int)layers_.size(); }
  const GpuLoraLayer& layer(int l) const { return layers_[l]; }
  size_t bytes() const;  // device memory of the operands (and of the values when owned)

  // Host values → the flat buffer, then refresh(). Device values → host; gradients → .grad (=).
  Status upload(const LoraAdapters& host, cudaStream_t stream);
  Status download(LoraAdapters& host, cudaStream_t stream) const;
  Status download_grads(LoraAdapters& host, cudaStream_t stream) const;
  // Rebuilds the bf16 operands from the fp32 values (after each optimizer step).
  Status refresh(cudaStream_t stream);

  // Forward of layer l over n rows: qkv32 (n, H·D + 2·G·D) fp32 += the q/k/v deltas of xn (n, C);
  // h (n, C) fp32 += the o delta of y (n, H·D). u: (n, 3r) bf16 working rows.
  Status forward_qkv(int l, float* qkv32, const bf16* xn, bf16* u, int n, cublasHandle_t cublas,
                     cudaStream_t stream) const;
  Status forward_o(int l, float* h, const bf16* y, bf16* u, int n, cublasHandle_t cublas,
                   cudaStream_t stream) const;
  // Backward of layer l over T rows (the scratch's): given dqkv (T, H·D + 2·G·D) bf16, the
  // gradient of the fused projection's output, dxn (T, C) += and the A, B gradients +=; given dh
  // (T, C) bf16, the gradient of the o projection's output, dy (T, H·D) += and the gradients +=.
  Status backward_qkv(int l, float* dxn, const bf16* dqkv, const bf16* xn, const GpuLoraScratch& w,
                      cublasHandle_t cublas, cudaStream_t stream);
  Status backward_o(int l, float* dy, const bf16* dh, const bf16* y, const GpuLoraScratch& w,
                    cublasHandle_t cublas, cudaStream_t stream);

  // Room for the backward of T tokens in `arena`.
  Result<GpuLoraScratch> scratch_allocate(kernels::cuda::DeviceArena& arena, int T) const;

 private:
  int C_ = 0, HD_ = 0, GD_ = 0, r_ = 0;
  float s_ = 1.0f;
  long P_ = 0;
  float* value_ = nullptr;
  float* grad_ = nullptr;
  kernels::cuda::DeviceBuffer<float> own_value_;
  kernels::cuda::DeviceArena operands_;
  std::vector<GpuLoraLayer> layers_;
};

}  // namespace golinear::model::cuda
