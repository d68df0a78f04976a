// One hybrid mixer layer (mixers/hybrid_mixer.h, the default recipe: gdn state, mix gate, conv
// on, no RoPE on the linear branch, any sinks/window) trained on the GPU: its parameters live in
// a flat fp32 buffer with their gradients (owned by the caller, e.g. one buffer for every layer
// so that one optimizer kernel updates them all), the gate weights also as one stacked bf16
// matrix [w_a; w_b; w_λ] (3H, C) for the forward GEMM, refreshed after each optimizer step.
// The training forward keeps what the backward needs in a GpuHybridScratch; the backward
// accumulates (+=) the gradient of every parameter. hybrid_mixer.cpp is the specification;
// tests/mixers/cuda compares the two.
//
// Layout of one layer's block of the flat buffer (gpu_hybrid_layout), chosen so that the three
// gate matrices are one contiguous (3H, C) block:
//   w_a, w_b, w_lambda (H, C) each · conv_q (H·D, 4) · conv_k, conv_v (G·D, 4)
//   · b_beta, A_log, dt_bias, b_lambda (H).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "common/result.h"
#include "kernels/cuda/cuda_common.h"
#include "mixers/mixer.h"
#include "mixers/mixer_factory.h"

namespace golinear::mixers::cuda {

using kernels::cuda::bf16;

// One tensor's place in a layer's block of the flat buffer.
struct GpuParamSlot {
  std::string name;  // checkpoint name (hybrid_mixer.h)
  long offset = 0;   // floats from the start of the layer's block
  long count = 0;
};

// Why `options`/`shape` cannot train on the GPU (one line), or ok.
Status gpu_hybrid_check_recipe(const MixerOptions& options, const AttentionShape& shape);

// The slots of one layer (see the file comment) and their total.
std::vector<GpuParamSlot> gpu_hybrid_layout(const AttentionShape& shape);
long gpu_hybrid_parameter_count(const AttentionShape& shape);

// Stage timing of the GPU trainers (TrainOptions::profile): mark(stage) records a CUDA
// event on the stream; the GPU time since the previous mark is charged to `stage`, so a stage's
// time includes any idle gap before it (host work, synchronization). collect() after the stream
// is idle folds the recorded intervals into the totals; report() is a table, one row per stage
// in order of first appearance. Disabled (the default), mark and collect do nothing.
class GpuStageProfile {
 public:
  GpuStageProfile() = default;
  GpuStageProfile(const GpuStageProfile&) = delete;
  GpuStageProfile& operator=(const GpuStageProfile&) = delete;
  ~GpuStageProfile();
  void enable() { enabled_ = true; }
  bool enabled() const { return enabled_; }
  void mark(const char* stage, cudaStream_t stream);
  Status collect();
  // Rows: stage, total ms, ms per `unit` (e.g. per sequence), share of the total.
  std::string report(const std::string& title, long units, const std::string& unit) const;

 private:
  bool enabled_ = false;
  std::vector<cudaEvent_t> events_;
  std::vector<const char*> pending_;  // stage of each recorded event
  size_t used_ = 0;
  std::vector<std::pair<std::string, double>> totals_;
  std::vector<long> counts_;
};

// Device buffers of one training forward + backward for T tokens, shareable by every layer of
// one shape (the layers run one after another).
class GpuHybridScratch {
 public:
  Status allocate(const AttentionShape& shape, const MixerOptions& options, int T);
  int T() const { return T_; }

  // forward (kept for the backward)
  bf16 *qc = nullptr, *kc = nullptr, *vc = nullptr;  // (T, H, D), (T, G, D) ×2 after the conv
  bf16 *qr = nullptr, *kr = nullptr;                 // RoPE'd qc, kc (exact branch)
  bf16 *qn = nullptr, *kn = nullptr;                 // unit qc, kc (linear branch)
  bf16* y_exact = nullptr;                           // (T, H, D)
  float* lse = nullptr;                              // (T, H)
  float* logits = nullptr;                           // (T, 3H): a, b, λ logits
  float *g = nullptr, *beta = nullptr, *lambda = nullptr;  // (T, H)
  bf16* y_lin = nullptr;                             // (T, H, D)
  float* y = nullptr;                                // (T, H, D) the mixer output, fp32
  // backward
  float* dy = nullptr;                               // (T, H, D) gradient of y (the caller's)
  float* dy_exact = nullptr;                         // (T, H, D)
  bf16* dy_lin = nullptr;                            // (T, H, D)
  float* dlogits = nullptr;                          // (T, 3H)
  float *dqn = nullptr, *dkn = nullptr, *dv_lin = nullptr;  // (T, H, D), (T, G, D) ×2
  float *dg = nullptr, *dbeta = nullptr;             // (T, H)
  float *dqr = nullptr, *dkr = nullptr, *dv = nullptr;      // (T, H, D), (T, G, D) ×2
  float *dqc = nullptr, *dkc = nullptr;              // (T, H, D), (T, G, D)
  bf16 *dlogits_hi = nullptr, *dlogits_lo = nullptr;  // (T, 3H) dlogits as a bf16 pair
  float2* rope_cs = nullptr;                         // (T, D/2) RoPE table
  void *gdn_forward_ws = nullptr, *gdn_backward_ws = nullptr, *attn_backward_ws = nullptr,
       *nmse_ws = nullptr, *conv_ws = nullptr;
  size_t gdn_forward_bytes = 0, gdn_backward_bytes = 0, attn_backward_bytes = 0, nmse_bytes = 0,
         conv_bytes = 0;
  // Stage timing of forward/backward (null: none).
  GpuStageProfile* profile = nullptr;

 private:
  int T_ = 0;
  kernels::cuda::DeviceBuffer<char> memory_;
};

class GpuHybridLayer {
 public:
  // value, grad: this layer's block of the flat buffers (gpu_hybrid_parameter_count floats).
  static Result<GpuHybridLayer> create(const MixerOptions& options, const AttentionShape& shape,
                                       const std::vector<float>& inv_freq, float* value,
                                       float* grad);

  // Parameters of a CPU hybrid mixer (by name) → device; refreshes the bf16 gates.
  Status upload(Mixer& mixer, cudaStream_t stream);
  // Device → the CPU mixer's parameter values (synchronous).
  Status download(Mixer& mixer, cudaStream_t stream) const;
  // Device → the CPU mixer's parameter gradients (tests).
  Status download_grads(Mixer& mixer, cudaStream_t stream) const;
  // w_gates ← bf16 of [w_a; w_b; w_λ] (after every optimizer step).
  Status refresh_gates(cudaStream_t stream);

  // s.y (T, H, D) fp32 from x (T, C), q (T, H, D), k, v (T, G, D) bf16 (before RoPE), T = s.T().
  // mix_output false: everything but the final mix (s.y is not written; attention transfer
  // fuses the mix with its loss, see backward_nmse).
  Status forward(GpuHybridScratch& s, const bf16* x, const bf16* q, const bf16* k, const bf16* v,
                 cublasHandle_t cublas, cudaStream_t stream, bool mix_output = true) const;
  // Parameter gradients (+=) of Σ s.dy · s.y, after forward on the same scratch and inputs.
  Status backward(GpuHybridScratch& s, const bf16* x, const bf16* q, const bf16* k,
                  const bf16* v, cublasHandle_t cublas, cudaStream_t stream);
  // The same, and the input gradients (end-to-end distillation), fp32, WRITTEN (=), any may be
  // null: dx (T, C) = dlogits · [w_a; w_b; w_λ] (fp32 GEMM on the fp32 parameters), dq (T, H, D),
  // dk, dv (T, G, D) the short conv's input gradients (before the conv, i.e. of q, k, v as given).
  Status backward(GpuHybridScratch& s, const bf16* x, const bf16* q, const bf16* k,
                  const bf16* v, cublasHandle_t cublas, cudaStream_t stream, float* dx,
                  float* dq, float* dk, float* dv);
  // Attention transfer without y and dy buffers: after forward(mix_output = false), `sums`
  // (device, 2 doubles) ← Σ (y − teacher)², Σ teacher² (kernels/cuda/hybrid_train.h,
  // mix_gate_nmse_forward); then backward_nmse adds the parameter gradients of scale · nmse
  // (the same as s.dy = nmse_loss_forward_backward's gradient, then backward).
  Status loss_nmse(GpuHybridScratch& s, double* sums, const bf16* teacher,
                   cudaStream_t stream) const;
  Status backward_nmse(GpuHybridScratch& s, const double* sums, float scale, const bf16* teacher,
                       const bf16* x, const bf16* q, const bf16* k, const bf16* v,
                       cublasHandle_t cublas, cudaStream_t stream);

  const std::vector<GpuParamSlot>& layout() const { return layout_; }

 private:
  // Everything below the mix gate (stages 3, 2, 1), after s.dy_exact, s.dy_lin and the λ columns
  // of s.dlogits are set.
  Status backward_below_mix(GpuHybridScratch& s, const bf16* x, const bf16* q, const bf16* k,
                            const bf16* v, cublasHandle_t cublas, cudaStream_t stream, float* dx,
                            float* dq, float* dk, float* dv);
  const float* param(const char* name) const;
  float* grad_of(const char* name) const;

  MixerOptions options_;
  AttentionShape shape_;
  std::vector<GpuParamSlot> layout_;
  float* value_ = nullptr;
  float* grad_ = nullptr;
  kernels::cuda::DeviceBuffer<bf16> w_gates_;     // (3H, C)
  kernels::cuda::DeviceBuffer<float> inv_freq_;   // (D/2)
};

}  // namespace golinear::mixers::cuda
