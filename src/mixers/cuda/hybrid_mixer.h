// The hybrid mixer of mixers/hybrid_mixer.h on the GPU: one implementation for inference and
// training. Its forward serves prefill (into a decode cache), tracing, attention transfer and
// end-to-end distillation; its backward serves both trainers; its decode step advances a batch
// of sequence caches by one token. mixers/hybrid_mixer.cpp is the specification;
// tests/mixers/cuda compares the two recipe by recipe.
//
// Recipes: state kind gdn (or none: the exact branch alone), mix gate / gate-lse / add / scale,
// conv on or off, linear RoPE on or off, any sinks and window (sinks + window <
// kHybridDecodeMaxKeys; s = w = 0 is pure replacement), head dim 64 or 128. GLA, kGLA and
// Hedgehog states are CPU-only (hybrid_check_recipe names them).
//
// Parameters live in a flat fp32 block per layer (value, and grad when training), addressed by
// the CPU mixer's names (hybrid_tensor_specs): the gate matrices first — w_a, w_b, w_lambda, those
// the recipe has, contiguous so that one GEMM computes every gate logit and one GEMM their
// gradient — then the other tensors in checkpoint order. A bf16 copy of the gate matrices feeds
// the forward GEMM; refresh_gates() renews it after an optimizer step.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/hybrid.h"
#include "mixers/mixer.h"
#include "mixers/mixer_factory.h"

namespace golinear::mixers::cuda {

using kernels::cuda::bf16;

// Why `options`/`shape` cannot run on the GPU (one line naming what), or ok.
Status hybrid_check_recipe(const MixerOptions& options, const AttentionShape& shape);

// One tensor's place in a layer's block of the flat buffer.
struct GpuParamSlot {
  std::string name;  // the CPU mixer's (checkpoint) name
  long offset = 0;   // floats from the start of the layer's block
  long count = 0;
};
// The slots of one layer (see the file comment) and their total.
std::vector<GpuParamSlot> hybrid_layout(const MixerOptions& options, const AttentionShape& shape);
long hybrid_parameter_count(const MixerOptions& options, const AttentionShape& shape);

// Stage timing of the GPU trainers and the bench: mark(stage) records a CUDA event on the
// stream; the GPU time since the previous mark is charged to `stage`, so a stage's time includes
// any idle gap before it (host work, synchronization). collect() after the stream is idle folds
// the recorded intervals into the totals; report() is a table, one row per stage in order of
// first appearance. Disabled (the default), mark and collect do nothing.
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
  // (stage, total ms) in order of first appearance.
  const std::vector<std::pair<std::string, double>>& totals() const { return totals_; }

 private:
  bool enabled_ = false;
  std::vector<cudaEvent_t> events_;
  std::vector<const char*> pending_;  // stage of each recorded event
  size_t used_ = 0;
  std::vector<std::pair<std::string, double>> totals_;
  std::vector<long> counts_;
};

// Device memory for one forward (and backward) of up to T tokens, shareable by every layer run
// one after another; the mixer carves it per call. `backward`: room for what the backward reads.
class HybridScratch {
 public:
  static size_t bytes(const MixerOptions& options, const AttentionShape& shape, int T,
                      bool backward);
  // Room for bytes(options, shape, T, backward) (grows, never shrinks).
  Status reserve(size_t bytes);
  char* base() const { return memory_.get(); }
  size_t capacity() const { return memory_.size(); }
  GpuStageProfile* profile = nullptr;  // stage marks of forward/backward (null: none)

 private:
  kernels::cuda::DeviceBuffer<char> memory_;
};

// The frozen backbone's hand-over to the mixer for T tokens of one sequence from position 0,
// device bf16: x (T, C) after input_layernorm, q (T, H, D), k, v (T, G, D) before RoPE.
struct HybridIO {
  int T = 0;
  const bf16* x = nullptr;
  const bf16* q = nullptr;
  const bf16* k = nullptr;
  const bf16* v = nullptr;
};

class GpuHybridMixer {
 public:
  // value, grad: this layer's block of flat buffers (hybrid_parameter_count floats; grad null for
  // inference). inv_freq (D/2) host: the model's RoPE frequencies.
  static Result<GpuHybridMixer> create(const MixerOptions& options, const AttentionShape& shape,
                                       const std::vector<float>& inv_freq, float* value,
                                       float* grad);

  const MixerOptions& options() const { return options_; }
  const AttentionShape& shape() const { return shape_; }
  const std::vector<GpuParamSlot>& layout() const { return layout_; }
  const kernels::cuda::HybridShape& kernel_shape() const { return kshape_; }
  const kernels::cuda::HybridParams& kernel_params() const { return kparams_; }

  // The CPU mixer's parameter values (by name) → device, then refresh_gates.
  Status upload(Mixer& mixer, cudaStream_t stream);
  // Device → the CPU mixer's parameter values / gradients (synchronous).
  Status download(Mixer& mixer, cudaStream_t stream) const;
  Status download_grads(Mixer& mixer, cudaStream_t stream) const;
  // The bf16 gate matrices ← the fp32 values (after every optimizer step).
  Status refresh_gates(cudaStream_t stream);

  // Inference forward: y (T, H, D) bf16. state_final (H, D, D) fp32 or null: the delayed state
  // after T tokens (what a decode cache holds). The scratch needs bytes(…, T, false).
  Status forward(HybridScratch& s, const HybridIO& in, bf16* y, float* state_final,
                 cublasHandle_t cublas, cudaStream_t stream) const;
  // Training forward, keeping what the backward needs (scratch: bytes(…, T, true)); y (T, H, D)
  // fp32 into y32 unless null (attention transfer fuses the mix with its loss: loss_nmse).
  Status forward_train(HybridScratch& s, const HybridIO& in, float* y32, cublasHandle_t cublas,
                       cudaStream_t stream) const;
  // After forward_train on the same scratch and inputs: parameter gradients (+=) of Σ dy·y and
  // the input gradients, fp32, WRITTEN (=), any may be null: dx (T, C), dq (T, H, D), dk, dv
  // (T, G, D) of the inputs as given (before the conv). dy (T, H, D) fp32.
  Status backward(HybridScratch& s, const HybridIO& in, const float* dy, cublasHandle_t cublas,
                  cudaStream_t stream, float* dx = nullptr, float* dq = nullptr,
                  float* dk = nullptr, float* dv = nullptr);
  // Attention transfer: after forward_train(y32 = null), sums (device, 2 doubles) ← Σ (y − t)²,
  // Σ t² against the teacher's y (T, H, D) bf16; backward_nmse then adds the parameter gradients
  // of scale · nmse (no y or dy buffer: the mix is fused with the loss).
  Status loss_nmse(HybridScratch& s, const HybridIO& in, double* sums, const bf16* teacher,
                   cudaStream_t stream) const;
  Status backward_nmse(HybridScratch& s, const HybridIO& in, const double* sums, float scale,
                       const bf16* teacher, cublasHandle_t cublas, cudaStream_t stream);

  // The decode cache of one sequence (kernels/cuda/hybrid.h): bytes, and a zeroed view carved
  // from `memory`.
  size_t cache_bytes() const { return kernels::cuda::hybrid_cache_bytes(kshape_); }
  Result<kernels::cuda::HybridCacheView> cache_create(void* memory, cudaStream_t stream) const;
  // An empty cache filled by a whole-sequence forward (the prompt): y as forward(), then the
  // cache as T decode steps would leave it. `cache` is the view (host copy) of the sequence.
  Status prefill(HybridScratch& s, const HybridIO& in, bf16* y,
                 const kernels::cuda::HybridCacheView& cache, cublasHandle_t cublas,
                 cudaStream_t stream) const;
  // One token of one sequence: y (H, D) from x (C), q (H, D), k, v (G, D); the view by value.
  // One launch; graph-capturable.
  Status decode_step(bf16* y, const kernels::cuda::HybridCacheView& cache, const bf16* x,
                     const bf16* q, const bf16* k, const bf16* v, cudaStream_t stream) const;
  // One token for each of B sequences (caches: a device array of B views): y (B, H, D) from
  // x (B, C), q (B, H, D), k, v (B, G, D). One launch; graph-capturable. `how`: the column
  // split and whether it is launched dependent (kernels::cuda::HybridDecodeLaunch).
  Status decode_step(bf16* y, const kernels::cuda::HybridCacheView* caches, int B, const bf16* x,
                     const bf16* q, const bf16* k, const bf16* v, cudaStream_t stream,
                     const kernels::cuda::HybridDecodeLaunch& how = {}) const;

  // The buffers of one call, carved from a HybridScratch (hybrid_mixer.cpp).
  struct Buffers;

 private:
  Buffers carve(char* base, int T, bool backward) const;
  Status forward_impl(HybridScratch& s, const HybridIO& in, bf16* y16, float* y32,
                      float* state_final, bool keep, cublasHandle_t cublas,
                      cudaStream_t stream) const;
  // Everything below the mixing, once dy_exact, dy_lin and the mixing coefficient's gradients
  // are set.
  Status backward_below_mix(HybridScratch& s, const HybridIO& in, cublasHandle_t cublas,
                            cudaStream_t stream, float* dx, float* dq, float* dk, float* dv);
  const float* param(const char* name) const;
  float* grad_of(const char* name) const;

  MixerOptions options_;
  AttentionShape shape_;
  kernels::cuda::HybridShape kshape_;
  kernels::cuda::HybridParams kparams_;
  std::vector<GpuParamSlot> layout_;
  int gate_rows_ = 0;  // R: rows of the stacked gate matrices (0, 2H or 3H)
  float* value_ = nullptr;
  float* grad_ = nullptr;
  kernels::cuda::DeviceBuffer<bf16> w_gates_;     // (R, C)
  kernels::cuda::DeviceBuffer<float> inv_freq_;   // (D/2)
  kernels::cuda::DeviceBuffer<float> identity_taps_;  // conv off: (max(H, G)·D, 4) = (0, 0, 0, 1)
};

}  // namespace golinear::mixers::cuda
