// The transformer of model/transformer.h on one GPU: bf16 weights, fp32 accumulation, the same
// families (Llama-3.x, Qwen2, Qwen3) and the same mixers per layer (softmax attention, or the
// default hybrid recipe: gdn state, gate mix, conv). model/transformer.h is the specification;
// tests/model/cuda/ compares the two.
//
// INTERFACE CONTRACT (written before the implementation; the GPU trainer in train/cuda codes
// against gpu_model_trace, so change it only together with its callers).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/result.h"
#include "kernels/cuda/cuda_common.h"
#include "model/transformer.h"

namespace golinear::cuda {

using kernels::cuda::bf16;

class GpuModel;

// Uploads `model` (its config, weights and mixers) to the current GPU as bf16.
Result<std::unique_ptr<GpuModel>> gpu_model_upload(const Model& model);

// What the frozen backbone hands the mixer of one layer, and what the teacher's mixer returned,
// for T tokens of one sequence: device pointers, bf16, valid until the next call on the model.
struct GpuLayerTrace {
  const bf16* x = nullptr;  // (T, C) after input_layernorm
  const bf16* q = nullptr;  // (T, H, D) after q_proj (+bias, +q_norm), before RoPE
  const bf16* k = nullptr;  // (T, G, D) after k_proj (+bias, +k_norm), before RoPE
  const bf16* v = nullptr;  // (T, G, D) after v_proj (+bias)
  const bf16* y = nullptr;  // (T, H, D) the layer's mixer output (before o_proj)
};

// Forward of `tokens` (host, T ids, one sequence from position 0) through the model as loaded;
// fills one GpuLayerTrace per layer. The attention-transfer teacher pass.
Status gpu_model_trace(GpuModel& model, const int32_t* tokens, int T,
                       std::vector<GpuLayerTrace>* layers);

}  // namespace golinear::cuda

// ---- beyond the contract: the whole model for inference and the benchmark -------------------

#include <cublas_v2.h>

#include "kernels/cuda/hybrid.h"
#include "mixers/mixer_factory.h"

namespace golinear::cuda {

using kernels::cuda::HybridCacheView;
using kernels::cuda::HybridParams;
using kernels::cuda::HybridShape;

// Pipelined tracing (attention transfer runs the teacher of the next sequence while the students
// train on this one): gpu_model_trace into the trace buffers of `slot` (0 or 1; slot 0 is
// gpu_model_trace's, slot 1's are allocated on first use), enqueued on the model's stream behind
// `wait` (an event, or null) and returned without waiting for the GPU; `done` (an event, or
// null) is recorded once the traces are written. The tokens are staged in pinned memory before
// it returns. A slot's traces stay valid until the next call on that slot, which the caller
// orders after its reads through `wait`.
Status gpu_model_trace_async(GpuModel& model, const int32_t* tokens, int T, int slot,
                             cudaEvent_t wait, cudaEvent_t done,
                             std::vector<GpuLayerTrace>* layers);

// Device memory owned in pieces (plain cudaMalloc), freed together.
class DeviceArena {
 public:
  DeviceArena() = default;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena() { clear(); }
  template <class T>
  Result<T*> alloc(size_t n) {
    GL_ASSIGN_OR_RETURN(void* p, alloc_bytes(n * sizeof(T)));
    return static_cast<T*>(p);
  }
  Result<void*> alloc_bytes(size_t bytes);
  void clear();
  size_t bytes() const { return bytes_; }

 private:
  std::vector<void*> blocks_;
  size_t bytes_ = 0;
};

// Host fp32 → a new array in `arena` (synchronous): bf16 of the concatenated parts, or fp32 (null
// for an empty vector, e.g. a bias the model does not have).
Result<bf16*> upload_bf16(DeviceArena& arena, const std::vector<const std::vector<float>*>& parts,
                          cudaStream_t stream);
Result<float*> upload_f32(DeviceArena& arena, const std::vector<float>& x, cudaStream_t stream);

// One layer's device weights.
// One layer's frozen weights on the device (also the GPU distillation's backbone).
struct GpuLayerWeights {
  float* input_norm = nullptr;  // (C)
  bf16* w_qkv = nullptr;        // (H·D + 2·G·D, C) [q_proj; k_proj; v_proj]
  float* b_qkv = nullptr;       // (H·D + 2·G·D) or null
  float* q_norm = nullptr;      // (D) Qwen3, or null
  float* k_norm = nullptr;      // (D) Qwen3, or null
  bf16* w_o = nullptr;          // (C, H·D)
  float* b_o = nullptr;         // (C) or null
  float* post_norm = nullptr;   // (C)
  bf16* w_gate_up = nullptr;    // (2F, C) [gate_proj; up_proj]
  bf16* w_down = nullptr;       // (C, F)
};
// `w` (host fp32) into `arena` as above (synchronous).
Status upload_layer_weights(DeviceArena& arena, const LayerWeights& w, const ModelConfig& c,
                            cudaStream_t stream, GpuLayerWeights* out);

struct GpuLayer : GpuLayerWeights {
  bool hybrid = false;          // else softmax attention
  HybridShape hshape;
  HybridParams hparams;         // pointers into mixer_memory
  std::unique_ptr<DeviceArena> mixer_memory;
};

// The mixer of layer `layer` (mixers/: softmax attention, nothing to upload; the default-recipe
// hybrid, its parameters) into `out` (its hybrid, hshape, hparams, mixer_memory), synchronous.
Status upload_layer_mixer(const mixers::Mixer& mixer, int layer, const ModelConfig& c,
                          const float* inv_freq, cudaStream_t stream, GpuLayer* out);

class GpuSequenceCache;
struct GpuLoadStats;

class GpuModel {
 public:
  GpuModel() = default;
  GpuModel(const GpuModel&) = delete;
  GpuModel& operator=(const GpuModel&) = delete;
  ~GpuModel();

  const ModelConfig& config() const { return config_; }
  cudaStream_t stream() const { return stream_; }
  // Bytes of the weights on the device (base model + mixer parameters).
  size_t weight_bytes() const;
  bool has_hybrid_layers() const;
  bool has_softmax_layers() const;

  // Every layer softmax attention (the base model).
  void set_all_softmax();
  // Every layer the default hybrid recipe (gdn, mix gate, conv on) with freshly initialised
  // parameters on the device (mixers/hybrid_mixer.h's init: conv identity, w_a/w_b N(0, 0.02²),
  // w_lambda N(0, 0.02²), b_lambda −2, b_beta 0, A_log = log U(1, 16), dt_bias from dt ∈
  // [1e-3, 1e-1]), layer l from seed + l.
  Status set_all_hybrid_random(const mixers::MixerOptions& options, uint64_t seed);

  // Forward of T tokens from position 0: ids (T) on the device; logits (T, V) fp32 on the device,
  // or (V) for the last token when last_only, or none when null. `cache` (empty) is filled:
  // keys and values of softmax layers, the hybrid caches from the chunked forward (its final
  // delayed state, conv rows, sinks, window ring, gates). `trace` keeps every layer's mixer I/O.
  Status forward_device(const int32_t* ids, int T, float* logits, bool last_only,
                        std::vector<GpuLayerTrace>* trace, GpuSequenceCache* cache);
  // The same from host ids into host logits (T·V or V floats).
  Status forward(const int32_t* ids, int T, float* logits, bool last_only);
  // Frees the activation buffers of the last forward (they grow to the longest sequence).
  void release_scratch();

  // Construction (gpu_model_upload, gpu_model_random).
  Status init(const ModelConfig& config);

 private:
  friend class GpuSequenceCache;
  friend Status gpu_model_trace(GpuModel&, const int32_t*, int, std::vector<GpuLayerTrace>*);
  friend Status gpu_model_trace_async(GpuModel&, const int32_t*, int, int, cudaEvent_t,
                                      cudaEvent_t, std::vector<GpuLayerTrace>*);
  friend Status gpu_decode(GpuModel&, GpuSequenceCache&, int32_t, float*, int32_t*);
  friend Status gpu_prefill(GpuModel&, GpuSequenceCache&, const int32_t*, int, float*);
  friend Result<std::unique_ptr<GpuModel>> gpu_model_upload(const Model& model);
  friend Result<std::unique_ptr<GpuModel>> gpu_model_load(const std::string&, const Model&,
                                                         GpuLoadStats*);
  friend Result<std::unique_ptr<GpuModel>> gpu_model_random(const ModelConfig& config,
                                                           uint64_t seed);
  Status ensure_scratch(int T, bool trace);

  ModelConfig config_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceArena weights_;  // base weights + cuBLAS workspace
  bf16* embed_ = nullptr;       // (V, C)
  bf16* lm_head_ = nullptr;     // (V, C), = embed_ when tied
  float* final_norm_ = nullptr; // (C)
  float* inv_freq_ = nullptr;   // (D/2)
  std::vector<GpuLayer> layers_;

  // Activations of forward_device, for up to scratch_T_ tokens.
  DeviceArena scratch_;
  int scratch_T_ = 0;
  bool scratch_trace_ = false;
  int32_t* ids_ = nullptr;
  float* h_ = nullptr;                        // (T, C) residual stream, fp32
  bf16 *xn_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr, *y_ = nullptr;
  bf16 *qr_ = nullptr, *kr_ = nullptr;        // RoPE'd copies (softmax layers)
  float* qkv32_ = nullptr;                    // (chunk, H·D + 2·G·D)
  bf16 *xn2_ = nullptr, *gu_ = nullptr, *act_ = nullptr;  // (chunk, C), (chunk, 2F), (chunk, F)
  // forward()'s device logits, grown to the most rows asked for (no allocation per call).
  DeviceArena logits_memory_;
  float* logits_ = nullptr;
  size_t logits_rows_ = 0;
  void* hybrid_ws_ = nullptr;
  size_t hybrid_ws_bytes_ = 0;
  std::vector<GpuLayerTrace> trace_;          // per-layer buffers when tracing
  // gpu_model_trace_async: slot 1's trace buffers, the pinned token staging of both slots.
  DeviceArena trace_alt_memory_;
  std::vector<GpuLayerTrace> trace_alt_;
  int32_t* pinned_ids_[2] = {nullptr, nullptr};
  cudaEvent_t ids_copied_[2] = {nullptr, nullptr};
  int pinned_T_ = 0;
};

// Random bf16 weights of `config`'s shape built on the GPU (no host copy): matrices N(0, 0.02²),
// norms 1, biases N(0, 0.02²); RoPE from the config; every layer softmax attention.
Result<std::unique_ptr<GpuModel>> gpu_model_random(const ModelConfig& config, uint64_t seed);

// The decode state of one sequence: a KV cache of max_context tokens per softmax layer, the
// constant-size hybrid cache per hybrid layer, and the buffers of a one-token step (so that a
// captured CUDA graph of the step stays valid).
class GpuSequenceCache {
 public:
  static Result<std::unique_ptr<GpuSequenceCache>> create(GpuModel& model, long max_context);
  ~GpuSequenceCache();
  long position() const { return position_; }
  long max_context() const { return max_context_; }
  size_t bytes() const;  // KV caches + hybrid caches (not the step buffers)
  // Back to position 0 (hybrid caches zeroed; KV rows are overwritten by the next tokens).
  Status reset();

  // Enqueues one step for the token in token_device() at position `pos` (softmax layers write
  // slot pos and attend over pos + 1 keys; hybrid layers use their device position and advance
  // it); leaves logits_device() (V) and argmax in token_device() (greedy feedback).
  Status enqueue_step(long pos);
  int32_t* token_device() const { return token_; }
  float* logits_device() const { return logits_; }
  // Captures enqueue_step(pos) into a CUDA graph (replaced on each call) / launches it.
  Status capture_step(long pos);
  Status launch_step();

  // For the benchmark: position `pos` without running the tokens: softmax K/V rows [0, pos)
  // random, hybrid caches random state/ring/sinks at device position pos.
  Status fill_random(long pos, uint64_t seed);

 private:
  friend Status gpu_decode(GpuModel&, GpuSequenceCache&, int32_t, float*, int32_t*);
  friend Status gpu_prefill(GpuModel&, GpuSequenceCache&, const int32_t*, int, float*);
  friend class GpuModel;
  GpuModel* model_ = nullptr;
  long max_context_ = 0;
  long position_ = 0;
  DeviceArena memory_;   // caches
  DeviceArena step_;     // one-token buffers
  size_t cache_bytes_ = 0;
  std::vector<bf16*> k_, v_;                  // (max_context, G, D) per softmax layer
  std::vector<HybridCacheView> hybrid_;       // per hybrid layer
  std::vector<void*> hybrid_memory_;          // per hybrid layer
  void* attn_ws_ = nullptr;
  size_t attn_ws_bytes_ = 0;
  int32_t* token_ = nullptr;                  // (1)
  int32_t* next_ = nullptr;                   // (1)
  float* h_ = nullptr;                        // (C)
  bf16 *xn_ = nullptr, *q_ = nullptr, *k1_ = nullptr, *v1_ = nullptr, *qr_ = nullptr,
       *y_ = nullptr, *xn2_ = nullptr, *gu_ = nullptr, *act_ = nullptr;
  float* qkv32_ = nullptr;
  float* logits_ = nullptr;                   // (V)
  cudaGraphExec_t graph_ = nullptr;
};

// Appends T prompt tokens (host) to the cache and writes the last token's logits (V, host) when
// `last_logits` is not null. An empty cache is filled by one forward (flash attention for softmax
// layers, the chunked hybrid forward plus hybrid_cache_fill for hybrid layers); a cache that
// already holds tokens takes them through the decode step one by one.
Status gpu_prefill(GpuModel& model, GpuSequenceCache& cache, const int32_t* tokens, int T,
                   float* last_logits);

// One token: logits (V, host) and/or its argmax (host), either may be null. A model whose
// layers are all hybrid replays one captured CUDA graph per token; otherwise the step is
// enqueued directly (the KV cache length is baked into launches).
Status gpu_decode(GpuModel& model, GpuSequenceCache& cache, int32_t token, float* logits,
                  int32_t* next);

}  // namespace golinear::cuda
