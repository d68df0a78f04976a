// The transformer of model/transformer.h on one GPU: bf16 weights, fp32 accumulation, the same
// families (Llama-3.x, Qwen2, Qwen3) and the same mixers per layer (softmax attention, or any
// recipe of the GPU hybrid mixer, mixers/cuda/hybrid_mixer.h). One layer loop
// (GpuModel::forward_device) serves prefill, trace, the trainers' passes and, through its
// blocks, the decode step; model/cuda/transformer_backward.h is its backward.
// model/transformer.h is the specification; tests/model/cuda/ compares the two.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/result.h"
#include "kernels/cuda/cuda_common.h"
#include "model/transformer.h"

namespace golinear::model::cuda {

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

}  // namespace golinear::model::cuda

// ---- beyond the contract: the whole model for inference and the benchmark -------------------

#include <cublas_v2.h>

#include "kernels/cuda/hybrid.h"
#include "mixers/cuda/hybrid_mixer.h"
#include "mixers/mixer_factory.h"
#include "model/cuda/lora.h"

namespace golinear::model::cuda {

using kernels::cuda::HybridCacheView;

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

using kernels::cuda::DeviceArena;  // kernels/cuda/device_resources.h

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
  // The layer's linear-time mixer, or null: softmax attention. Either the model's own
  // (own_mixer, parameters fp32 in mixer_values) or one attached by a trainer, whose parameters
  // live in the trainer's flat buffers (GpuModel::attach_mixer).
  mixers::cuda::GpuHybridMixer* hybrid = nullptr;
  std::unique_ptr<mixers::cuda::GpuHybridMixer> own_mixer;
  kernels::cuda::DeviceBuffer<float> mixer_values;
};

class GpuSequenceCache;

// What a forward keeps for the backward of the frozen network (model/cuda/transformer_backward.h),
// per layer, for T tokens. Owned by the caller (gpu_activations_allocate).
struct GpuLayerActivations {
  float* h_in = nullptr;   // (T, C) the residual stream entering the layer
  float* h_mid = nullptr;  // (T, C) after the attention block
  bf16 *xn = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *y = nullptr;  // the mixer's I/O
  bf16* gu = nullptr;      // (T, 2F) [gate; up] of the MLP
  float *q_raw = nullptr, *k_raw = nullptr;  // (T, H·D), (T, G·D) before q/k norm (Qwen3), or null
  bf16 *qr = nullptr, *kr = nullptr;         // softmax layers: RoPE'd q, k
  float* lse = nullptr;                      // softmax layers: (T, H)
};
struct GpuActivations {
  int T = 0;
  std::vector<GpuLayerActivations> layers;
  float* h_final = nullptr;  // (T, C) before the final norm
  DeviceArena memory;
};
// Room for every layer's activations of T tokens of `model`.
Result<std::unique_ptr<GpuActivations>> gpu_activations_allocate(const GpuModel& model, int T);

// Rows [first, first + count) of a forward's input (GpuForwardOptions::logit_rows).
struct GpuRowRange {
  int first = 0;
  int count = 0;
};

// One forward's choices (GpuModel::forward_device).
struct GpuForwardOptions {
  float* logits = nullptr;  // (T, V) fp32 on the device, or (V) of the last row when last_only
  bool last_only = false;
  std::vector<GpuLayerTrace>* trace = nullptr;  // every layer's mixer I/O
  GpuSequenceCache* cache = nullptr;            // an empty decode cache to fill (the prefill)
  GpuActivations* keep = nullptr;               // what the backward of the network reads
  bool all_softmax = false;  // every layer softmax attention, whatever its mixer (the teacher)
  // Packed sequences (varlen, as FlashAttention's cu_seqlens): the T ids are independent
  // sequences of these lengths (Σ = T), each read from position 0 as if alone. The per-token
  // stages run over all T rows at once (each weight read once for the pack), the mixers once per
  // sequence. Empty: one sequence of T. Not with cache, keep or trace (`caches` fills one cache
  // per sequence).
  std::span<const int> sequences = {};
  // With `sequences`: an empty decode cache per sequence to fill (each sequence's prefill, as
  // `cache` for one), or none.
  std::span<GpuSequenceCache* const> caches = {};
  // Logits of these rows only (ascending, disjoint), one range after the other in `logits`;
  // empty: every row (or the last one, last_only).
  std::span<const GpuRowRange> logit_rows = {};
};

class GpuSequenceCache;
struct GpuLoadStats;
struct GpuBatchStep;

class GpuModel {
 public:
  GpuModel();
  GpuModel(const GpuModel&) = delete;
  GpuModel& operator=(const GpuModel&) = delete;
  ~GpuModel();

  const ModelConfig& config() const { return config_; }
  cudaStream_t stream() const { return stream_; }
  // Bytes of the weights on the device (base model + mixer parameters + own LoRA adapters).
  size_t weight_bytes() const;
  bool has_hybrid_layers() const;
  bool has_softmax_layers() const;

  // Every layer softmax attention (the base model).
  void set_all_softmax();
  // Layer `layer`'s mixer: softmax attention, or a hybrid mixer whose recipe and parameters are
  // those of `mixer` (mixers/hybrid_mixer.h; other kinds are refused in one line).
  Status set_layer_mixer(int layer, mixers::Mixer& mixer);
  // A trainer's GPU mixer as layer `layer`'s (not owned; null: softmax attention again).
  void attach_mixer(int layer, mixers::cuda::GpuHybridMixer* mixer);
  // LoRA adapters on q/k/v/o (model/cuda/lora.h), applied unmerged by every forward but the
  // all-softmax teacher pass: the model's own (uploaded from host adapters, for inference) or a
  // trainer's (attached, not owned; null: none).
  Status set_lora(const LoraAdapters& host);
  void attach_lora(GpuLora* lora);
  GpuLora* lora() const { return lora_; }

  // The parts the backward of the network reads (model/cuda/transformer_backward.h).
  const GpuLayer& layer(int l) const { return layers_[l]; }
  const bf16* lm_head() const { return lm_head_; }
  const float* final_norm() const { return final_norm_; }
  const float* inv_freq() const { return inv_freq_; }
  cublasHandle_t cublas() const { return cublas_; }
  // Every layer a hybrid of `options` with fresh parameters, initialised as the CPU mixer
  // initialises them (mixers::mixer_create), layer l from seed + l.
  Status set_all_hybrid_random(const mixers::MixerOptions& options, uint64_t seed);

  // Forward of T tokens from position 0: ids (T) on the device. An empty `cache` is filled: keys
  // and values of softmax layers, the hybrid caches by the mixers' prefill (final delayed state,
  // conv rows, sinks, window ring, gates).
  // The one layer loop: embeddings, every layer (block_input → mixer → block_output), the head,
  // as `options` asks.
  Status forward_device(const int32_t* ids, int T, const GpuForwardOptions& options);
  // The same from host ids into host logits (T·V or V floats).
  Status forward(const int32_t* ids, int T, float* logits, bool last_only);
  // Frees the activation buffers of the last forward (they grow to the longest sequence).
  void release_scratch();
  // Counts the changes of the layers' mixers and of the LoRA adapters: a sequence cache holds
  // per-layer state of the mixers it was made for, and a captured decode graph their pointers.
  uint64_t mixers_version() const { return mixers_version_; }

  // Construction (gpu_model_upload, gpu_model_random).
  Status init(const ModelConfig& config);

 private:
  friend class GpuSequenceCache;
  friend Status gpu_model_trace(GpuModel&, const int32_t*, int, std::vector<GpuLayerTrace>*);
  friend Status gpu_model_trace_async(GpuModel&, const int32_t*, int, int, cudaEvent_t,
                                      cudaEvent_t, std::vector<GpuLayerTrace>*);
  friend Status gpu_prefill(GpuModel&, GpuSequenceCache&, const int32_t*, int, float*);
  friend Status gpu_prefill_batch(GpuModel&, GpuSequenceCache* const*, const int32_t* const*,
                                  const int*, int, float* const*);
  friend Status gpu_decode_batch(GpuModel&, GpuSequenceCache* const*, const int32_t*, int, float*,
                                 int32_t*);
  friend Result<std::unique_ptr<GpuModel>> gpu_model_upload(const Model& model);
  friend Result<std::unique_ptr<GpuModel>> gpu_model_load(const std::string&, const Model&,
                                                         GpuLoadStats*);
  friend Result<std::unique_ptr<GpuModel>> gpu_model_random(const ModelConfig& config,
                                                           uint64_t seed);
  // whole_rows: the per-token stages' working rows for all T rows at once (a forward that keeps
  // activations), else for row chunks; softmax: RoPE'd copies for softmax attention even when no
  // layer is softmax (a teacher pass). The hybrid layers' scratch is sized on every call.
  Status ensure_scratch(int T, bool trace, bool whole_rows = false, bool softmax = false);
  // The per-token parts of a transformer layer over n rows (one layer block, used by the
  // whole-sequence forward in row chunks and by the one-token decode step): block_input
  // xn = RMSNorm(h), [q; k; v] = xn W_qkvᵀ (+bias, +q/k norm), the mixer's inputs; block_output
  // h += y W_oᵀ (+bias), h += MLP(RMSNorm(h)). qkv32 (n, H·D + 2·G·D), xn2 (n, C), gu (n, 2F),
  // act (n, F): working rows.
  // q_raw, k_raw (n, H·D), (n, G·D) or null: q, k before their per-head norm (kept for the
  // backward); h_mid (n, C) or null: h after the attention block.
  // lora_u (n, 3r) or null: working rows of the layer's LoRA adapters, which run when given.
  // One row (n = 1) with k = q + H·D and v = k + G·D and none of bias, q/k norm, q_raw, lora_u:
  // the product writes q, k, v in bf16 itself (qkv32 unused).
  Status block_input(const GpuLayer& L, const float* h, int n, bf16* xn, bf16* q, bf16* k,
                     bf16* v, float* qkv32, cudaStream_t s, float* q_raw = nullptr,
                     float* k_raw = nullptr, bf16* lora_u = nullptr) const;
  Status block_output(const GpuLayer& L, float* h, const bf16* y, int n, bf16* xn2, bf16* gu,
                      bf16* act, cudaStream_t s, float* h_mid = nullptr,
                      bf16* lora_u = nullptr) const;
  // logits_ grown to hold `rows` rows (forward's and gpu_prefill_batch's device logits).
  Status reserve_logits(size_t rows);
  // The final norm and the LM head over n rows of h.
  Status head_logits(const float* h, int n, float* logits, bf16* xn2, cudaStream_t s) const;

  ModelConfig config_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceArena weights_;  // base weights + cuBLAS workspace
  bf16* embed_ = nullptr;       // (V, C)
  bf16* lm_head_ = nullptr;     // (V, C), = embed_ when tied
  float* final_norm_ = nullptr; // (C)
  float* inv_freq_ = nullptr;   // (D/2)
  std::vector<GpuLayer> layers_;
  GpuLora* lora_ = nullptr;              // the adapters in use, or null
  std::unique_ptr<GpuLora> own_lora_;    // set_lora's

  // Activations of forward_device, for up to scratch_T_ tokens.
  DeviceArena scratch_;
  int scratch_T_ = 0;
  bool scratch_trace_ = false, scratch_whole_ = false;
  int32_t* ids_ = nullptr;
  float* h_ = nullptr;                        // (T, C) residual stream, fp32
  bf16 *xn_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr, *y_ = nullptr;
  bf16 *qr_ = nullptr, *kr_ = nullptr;        // RoPE'd copies (softmax layers)
  float* qkv32_ = nullptr;                    // (chunk, H·D + 2·G·D)
  bf16 *xn2_ = nullptr, *gu_ = nullptr, *act_ = nullptr;  // (chunk, C), (chunk, 2F), (chunk, F)
  bf16* lora_u_ = nullptr;                    // (chunk, 3r) when LoRA adapters are in use
  // forward()'s device logits, grown to the most rows asked for (no allocation per call).
  DeviceArena logits_memory_;
  float* logits_ = nullptr;
  size_t logits_rows_ = 0;
  kernels::cuda::DeviceBuffer<float> picked_h_;  // the residual rows of logit_rows, gathered
  mixers::cuda::HybridScratch hybrid_scratch_;  // every hybrid layer's forward, in turn
  std::vector<GpuLayerTrace> trace_;          // per-layer buffers when tracing
  // gpu_model_trace_async: slot 1's trace buffers, the pinned token staging of both slots.
  DeviceArena trace_alt_memory_;
  std::vector<GpuLayerTrace> trace_alt_;
  int32_t* pinned_ids_[2] = {nullptr, nullptr};
  cudaEvent_t ids_copied_[2] = {nullptr, nullptr};
  int pinned_T_ = 0;
  std::unique_ptr<GpuBatchStep> batch_step_;  // gpu_decode_batch's buffers and graphs
  uint64_t mixers_version_ = 0;
  // A layer's mixer or the adapters changed: the batch step's graphs and tables are dropped,
  // caches made before are refused (GpuSequenceCache::made_for).
  void mixers_changed();
};

// Random bf16 weights of `config`'s shape built on the GPU (no host copy): matrices N(0, 0.02²),
// norms 1, biases N(0, 0.02²); RoPE from the config; every layer softmax attention.
Result<std::unique_ptr<GpuModel>> gpu_model_random(const ModelConfig& config, uint64_t seed);

// The decode state of one sequence: a KV cache of max_context tokens per softmax layer and the
// constant-size hybrid cache per hybrid layer (the step's buffers are the model's:
// gpu_decode_batch).
class GpuSequenceCache {
 public:
  static Result<std::unique_ptr<GpuSequenceCache>> create(GpuModel& model, long max_context);
  ~GpuSequenceCache();
  long position() const { return position_; }
  long max_context() const { return max_context_; }
  // Whether this cache belongs to `model` as its mixers and adapters are now (a cache made
  // before set_layer_mixer, set_all_softmax, attach_mixer or a LoRA change is stale).
  bool made_for(const GpuModel& model) const {
    return model_ == &model && mixers_version_ == model.mixers_version_;
  }
  size_t bytes() const;  // KV caches + hybrid caches (not the step buffers)
  // Back to position 0 (hybrid caches zeroed; KV rows are overwritten by the next tokens).
  Status reset();

  // The state on the host and back (snapshots of a server slot): the hybrid caches whole and the
  // softmax layers' first position() key/value rows, state_bytes(position()) bytes. restore()
  // takes a state of a cache of the same model whose position fits this one's max_context.
  size_t state_bytes(long position) const;
  Status save(std::vector<char>* bytes) const;
  Status restore(std::span<const char> bytes, long position);
  // save() without waiting: enqueues the copy of the state as it stands after the work enqueued
  // so far on the model's stream into `host` (state_bytes(position()) bytes, pinned) on
  // `copy_stream`, records `done` there once the bytes are written, and returns. The model's
  // stream goes on meanwhile (other caches' steps overlap the copy); the next call that writes
  // this cache (a step, a prefill, reset, restore) first makes the model's stream wait on the
  // GPU for the copy. `host` is not to be read before `done` completed.
  Status save_async(char* host, cudaStream_t copy_stream, cudaEvent_t done);

  // For the benchmark: position `pos` without running the tokens: softmax K/V rows [0, pos)
  // random, hybrid caches random state/ring/sinks at device position pos.
  Status fill_random(long pos, uint64_t seed);

 private:
  friend Status gpu_prefill(GpuModel&, GpuSequenceCache&, const int32_t*, int, float*);
  friend Status gpu_prefill_batch(GpuModel&, GpuSequenceCache* const*, const int32_t* const*,
                                  const int*, int, float* const*);
  friend Status gpu_decode_batch(GpuModel&, GpuSequenceCache* const*, const int32_t*, int, float*,
                                 int32_t*);
  friend class GpuModel;
  // Enqueues the state's copies (save's layout) into `out` on stream s.
  Status copy_state_out(char* out, cudaStream_t s) const;
  // Before a write to the caches: the model's stream waits for save_async's pending copy.
  Status order_after_copy();
  GpuModel* model_ = nullptr;
  uint64_t mixers_version_ = 0;  // the model's at creation
  // Unique among the caches of the process: gpu_decode_batch's tables name their caches by it
  // (a new cache may take a freed one's address).
  uint64_t serial_ = 0;
  long max_context_ = 0;
  long position_ = 0;
  DeviceArena memory_;   // caches
  size_t cache_bytes_ = 0;
  std::vector<bf16*> k_, v_;                  // (max_context, G, D) per softmax layer
  std::vector<HybridCacheView> hybrid_;       // per layer (hybrid layers), host copies
  std::vector<void*> hybrid_memory_;          // per layer (hybrid layers)
  // save_async: the state's point on the model's stream, the end of its copy on the copy stream,
  // and whether a copy may still read the caches (created with the cache).
  kernels::cuda::CudaEvent state_ready_, copied_;
  bool copy_pending_ = false;
};

// Appends T prompt tokens (host) to the cache and writes the last token's logits (V, host) when
// `last_logits` is not null. An empty cache is filled by one forward (flash attention for softmax
// layers, the chunked hybrid forward plus hybrid_cache_fill for hybrid layers); a cache that
// already holds tokens takes them through the decode step one by one.
Status gpu_prefill(GpuModel& model, GpuSequenceCache& cache, const int32_t* tokens, int T,
                   float* last_logits);

// Prompts into several empty caches in one packed forward (GpuForwardOptions::sequences and
// caches: the products over all prompts' rows at once, each mixer's prefill per prompt):
// caches[i] (n distinct, empty, of `model`) takes tokens[i] (lengths[i] ≥ 1 tokens);
// last_logits[i] (V, host) the last token's logits, or null. Each cache ends as gpu_prefill
// leaves it; the logits can differ from gpu_prefill's in the last bits (products of other sizes).
Status gpu_prefill_batch(GpuModel& model, GpuSequenceCache* const* caches,
                         const int32_t* const* tokens, const int* lengths, int n,
                         float* const* last_logits);

// One token: logits (V, host) and/or its argmax (host), either may be null: gpu_decode_batch
// of this one sequence.
Status gpu_decode(GpuModel& model, GpuSequenceCache& cache, int32_t token, float* logits,
                  int32_t* next);

// One decode step of B sequences (model_decode_batch's twin): ids[b] (host) appended to
// caches[b] (B distinct caches of `model`); logits (B, V) and/or the argmax next (B) to the host,
// either may be null. One pass for the batch: each weight matrix is read once for the B rows
// (products of B rows), the hybrid layers advance the B caches in one launch, the softmax layers
// append each sequence's key and value at its own position and attend over its own cache
// (attention_decode_batch). The step is a captured CUDA graph, replayed while the batch size and,
// with softmax layers, the split of the keys stay the same (kernels/cuda/attention.h:
// attention_decode_split; it changes every 128 to a few thousand tokens of context; a softmax
// key is captured the second time it comes). Unlike the CPU step, a row is not computed as if
// alone: the products' kernels depend on B, so a sequence's logits can differ in the last bits
// with the batch it runs in.
Status gpu_decode_batch(GpuModel& model, GpuSequenceCache* const* caches, const int32_t* ids,
                        int B, float* logits, int32_t* next);

}  // namespace golinear::model::cuda
