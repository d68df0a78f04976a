// The decoder-only transformer of the Llama / Qwen2 / Qwen3 families on the CPU, fp32:
//   embed → [norm → q/k/v (+bias, +q/k norm) → mixer → o_proj → +res → norm → SwiGLU → +res]×L
//         → norm → lm_head
// Each layer's token mixer is a mixers::Mixer: softmax attention for the teacher, a linear
// mixer for a linearized layer. The model knows nothing of training or of the CLI.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/checkpoint.h"
#include "io/config.h"
#include "mixers/mixer.h"
#include "model/lora.h"

namespace golinear {

struct LayerWeights {
  std::vector<float> input_norm;  // (C)
  std::vector<float> q_proj;      // (H·D, C)
  std::vector<float> q_bias;      // (H·D) or empty
  std::vector<float> k_proj;      // (G·D, C)
  std::vector<float> k_bias;      // (G·D) or empty
  std::vector<float> v_proj;      // (G·D, C)
  std::vector<float> v_bias;      // (G·D) or empty
  std::vector<float> q_norm;      // (D) Qwen3, or empty
  std::vector<float> k_norm;      // (D) Qwen3, or empty
  std::vector<float> o_proj;      // (C, H·D)
  std::vector<float> o_bias;      // (C) or empty
  std::vector<float> post_norm;   // (C)
  std::vector<float> gate_proj;   // (F, C)
  std::vector<float> up_proj;     // (F, C)
  std::vector<float> down_proj;   // (C, F)
};

// One mixer per layer.
using MixerStack = std::vector<std::unique_ptr<mixers::Mixer>>;

// Every mixer's parameters with their layer: ("layers.<l>.<name>", parameter), in layer order,
// as linearization.safetensors and the training states name them (LoraAdapters::named_parameters
// names the adapters the same way).
std::vector<std::pair<std::string, mixers::Parameter*>> mixer_named_parameters(const MixerStack& mixers);

struct Model {
  ModelConfig config;
  std::vector<float> embed;       // (V, C)
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // (C)
  std::vector<float> lm_head;     // (V, C); empty when tied to embed
  std::vector<float> inv_freq;    // (D/2) RoPE inverse frequencies, scaling applied
  MixerStack mixers;              // one per layer
  LoraAdapters lora;              // LoRA on q/k/v/o (model/lora.h), or none

  bool has_backbone() const { return !embed.empty(); }
  const float* lm_head_weights() const { return lm_head.empty() ? embed.data() : lm_head.data(); }
  mixers::AttentionShape attention_shape() const;
};

// The host vector of `model` that holds the checkpoint tensor `spec` (io/checkpoint.h's table;
// its layer must exist in model.layers).
std::vector<float>* model_weights_of(Model& model, const TensorSpec& spec);

// What model_load reads: everything, or all but the backbone weights (embed, layers, final_norm,
// lm_head stay empty; their names and shapes are still checked): the config, RoPE and the
// mixers with their parameters, for a loader that puts the weights elsewhere (the GPU's
// gpu_model_load). A model without its backbone must not be run on the CPU.
enum class ModelLoadParts { all, without_backbone };

// Loads config.json and the weights of a checkpoint directory (fp32 in memory). Every layer
// has softmax attention, unless the directory holds a linearization (model/linearization.h),
// which is then applied (its LoRA adapters, if any, unmerged in model.lora; a CPU inference
// may fold them into the weights with lora_merge_into_weights). An adapter directory loads its
// base (model_directory_resolve).
Result<std::unique_ptr<Model>> model_load(const std::string& dir,
                                          ModelLoadParts parts = ModelLoadParts::all);

// What a forward pass can record besides the logits.
struct ForwardTrace {
  bool capture_hidden = false;  // hidden[0] embeddings, hidden[l] after layer l, hidden[L] normed
  std::vector<std::vector<float>> hidden;  // (L+1) × (T, C)

  // Per layer: the mixer's inputs and the mixer output (before o_proj), for attention transfer
  // and diagnostics.
  struct Layer {
    std::vector<float> x;  // (T, C) after input_layernorm
    std::vector<float> q;  // (T, H, D)
    std::vector<float> k;  // (T, G, D)
    std::vector<float> v;  // (T, G, D)
    std::vector<float> y;  // (T, H, D)
    // The recorded inputs as a mixer takes them (T tokens from position 0).
    mixers::MixerInputs inputs(int T, const float* inv_freq) const {
      mixers::MixerInputs in;
      in.T = T;
      in.x = x.data();
      in.q = q.data();
      in.k = k.data();
      in.v = v.data();
      in.inv_freq = inv_freq;
      return in;
    }
  };
  bool capture_mixer_io = false;
  std::vector<Layer> layers;

  // What model_backward needs besides the mixer I/O (implies capture_mixer_io).
  struct Activations {
    std::vector<float> h_in;   // (T, C) residual stream entering the layer
    std::vector<float> q_raw;  // (T, H, D) before the Qwen3 q_norm (empty otherwise)
    std::vector<float> k_raw;  // (T, G, D) before the Qwen3 k_norm (empty otherwise)
    std::vector<float> h_mid;  // (T, C) residual stream after the attention block
    std::vector<float> xn2;    // (T, C) after post_attention_layernorm
    std::vector<float> gate;   // (T, F) gate_proj output, before SiLU
    std::vector<float> up;     // (T, F) up_proj output
  };
  bool capture_activations = false;
  std::vector<Activations> activations;
  std::vector<float> h_final;   // (T, C) before the final norm
  std::vector<float> h_normed;  // (T, C) after it (the input of lm_head)
};

// Per-sequence decode state: one cache per layer's mixer.
struct SequenceCache {
  std::vector<std::unique_ptr<mixers::MixerCache>> layers;
  long position = 0;
  size_t bytes() const;
  // A deep copy (every layer's cache cloned): continue it and the original independently, e.g.
  // to score several continuations after one shared prefix.
  SequenceCache clone() const;
};

SequenceCache model_new_cache(const Model& model);

// Full forward of one sequence from position 0. logits (T, V) for every position, or only the
// last row when `last_only` (logits then holds V floats); none when `logits` is null (a
// forward for its trace).
void model_forward(const Model& model, const int32_t* ids, int T, float* logits,
                   bool last_only = false, ForwardTrace* trace = nullptr);

// Appends T tokens to the cache and writes their logits as model_forward does.
void model_forward_cached(const Model& model, SequenceCache& cache, const int32_t* ids, int T,
                          float* logits, bool last_only = true);

// One decode step of B sequences: ids[b] appended to caches[b] (B distinct caches), logits (B, V).
// The rows go through the layers in groups of kDecodeBatchRows: each weight matrix is read once
// per group (decode is bound by reading the weights), and a group is small enough for the
// kernels' few-rows product (kernels/cpu/linear: T ≤ 4), whose rows are computed as alone, so
// every sequence gets the logits model_forward_cached gives it, bit for bit, whatever the batch.
inline constexpr int kDecodeBatchRows = 4;
void model_decode_batch(const Model& model, SequenceCache* const* caches, const int32_t* ids, int B,
                        float* logits);

// log p(ids[t+1] | ids[..t]) for t = 0..T−2 from logits (T, V): the log-softmax picked.
std::vector<float> logprobs_of_next_tokens(const float* logits, const int32_t* ids, int T, int V);

// log softmax(row (V))[id].
float log_softmax_at(const float* row, int V, int32_t id);

}  // namespace golinear
