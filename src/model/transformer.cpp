#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/file.h"
#include "io/checkpoint.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/norm.h"
#include "mixers/softmax_mixer.h"
#include "model/linearization.h"

namespace golinear {

std::vector<std::pair<std::string, mixers::Parameter*>> mixer_named_parameters(const MixerStack& mixers) {
  std::vector<std::pair<std::string, mixers::Parameter*>> named;
  for (size_t l = 0; l < mixers.size(); ++l)
    for (mixers::Parameter* p : mixers[l]->parameters())
      named.emplace_back(str_cat("layers.", l, ".", p->name), p);
  return named;
}

namespace cpu = kernels::cpu;

mixers::AttentionShape Model::attention_shape() const {
  return {config.hidden_size, config.num_heads, config.num_kv_heads, config.head_dim};
}

std::vector<float>* model_weights_of(Model& model, const TensorSpec& t) {
  LayerWeights* w = t.layer >= 0 ? &model.layers.at(t.layer) : nullptr;
  switch (t.role) {
    case TensorRole::embed: return &model.embed;
    case TensorRole::final_norm: return &model.final_norm;
    case TensorRole::lm_head: return &model.lm_head;
    case TensorRole::input_norm: return &w->input_norm;
    case TensorRole::q_proj: return &w->q_proj;
    case TensorRole::q_bias: return &w->q_bias;
    case TensorRole::k_proj: return &w->k_proj;
    case TensorRole::k_bias: return &w->k_bias;
    case TensorRole::v_proj: return &w->v_proj;
    case TensorRole::v_bias: return &w->v_bias;
    case TensorRole::q_norm: return &w->q_norm;
    case TensorRole::k_norm: return &w->k_norm;
    case TensorRole::o_proj: return &w->o_proj;
    case TensorRole::o_bias: return &w->o_bias;
    case TensorRole::post_norm: return &w->post_norm;
    case TensorRole::gate_proj: return &w->gate_proj;
    case TensorRole::up_proj: return &w->up_proj;
    case TensorRole::down_proj: return &w->down_proj;
  }
  return nullptr;
}

Result<std::unique_ptr<Model>> model_load(const std::string& dir, ModelLoadParts parts) {
  GL_ASSIGN_OR_RETURN(ModelDirectory where, model_directory_resolve(dir));
  auto model = std::make_unique<Model>();
  GL_ASSIGN_OR_RETURN(model->config, model_config_read(where.base + "/config.json"));
  GL_ASSIGN_OR_RETURN(CheckpointWeights weights, CheckpointWeights::open(where.base));
  const ModelConfig& c = model->config;
  model->layers.resize(c.num_layers);
  for (const TensorSpec& t : checkpoint_tensor_specs(c)) {
    if (!weights.contains(t.name))
      return make_error(where.base, ": checkpoint is missing tensor '", t.name, "'");
    if (parts == ModelLoadParts::without_backbone) {  // checked, not read
      GL_TRY(weights.find(t.name, t.shape));
      continue;
    }
    GL_ASSIGN_OR_RETURN(*model_weights_of(*model, t), weights.read_f32(t.name, t.shape));
  }
  model->inv_freq = rope_inverse_frequencies(c.rope, c.head_dim);
  for (int l = 0; l < c.num_layers; ++l)
    model->mixers.push_back(std::make_unique<mixers::SoftmaxMixer>(model->attention_shape()));
  if (!where.linearization.empty()) GL_TRY(linearization_apply(*model, where.linearization));
  return model;
}

size_t SequenceCache::bytes() const {
  size_t total = 0;
  for (const auto& layer : layers) total += layer->bytes();
  return total;
}

SequenceCache SequenceCache::clone() const {
  SequenceCache copy;
  copy.layers.reserve(layers.size());
  for (const auto& layer : layers) copy.layers.push_back(layer->clone());
  copy.position = position;
  return copy;
}

SequenceCache model_new_cache(const Model& model) {
  SequenceCache cache;
  for (const auto& mixer : model.mixers) cache.layers.push_back(mixer->make_cache());
  return cache;
}

namespace {

void add_in_place(float* a, const float* b, long n) {
  for (long i = 0; i < n; ++i) a[i] += b[i];
}

// The shared body of model_forward, model_forward_cached and model_decode_batch: tokens ids[0..T)
// at positions pos0.., through each layer's mixer (cached when `cache` is given); or, when
// `row_caches` (T) is given, T sequences of one token each, row t appended to row_caches[t].
void forward_tokens(const Model& model, const int32_t* ids, int T, long pos0, SequenceCache* cache,
                    float* logits, bool last_only, ForwardTrace* trace,
                    SequenceCache* const* row_caches = nullptr) {
  const ModelConfig& c = model.config;
  const int C = c.hidden_size, F = c.intermediate_size, V = c.vocab_size;
  const int H = c.num_heads, G = c.num_kv_heads, D = c.head_dim;
  const float eps = (float)c.rms_norm_eps;
  std::vector<float> h((long)T * C), xn((long)T * C), q((long)T * H * D), k((long)T * G * D),
      v((long)T * G * D), y((long)T * H * D), proj((long)T * C), gate((long)T * F),
      up((long)T * F);
  for (int t = 0; t < T; ++t)
    std::memcpy(&h[(long)t * C], &model.embed[(long)ids[t] * C], sizeof(float) * C);
  if (trace && trace->capture_hidden) trace->hidden.assign(1, h);
  const bool keep_acts = trace && trace->capture_activations;
  const bool keep_io = trace && (trace->capture_mixer_io || keep_acts);
  if (keep_io) trace->layers.assign(c.num_layers, {});
  if (keep_acts) trace->activations.assign(c.num_layers, {});

  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& w = model.layers[l];
    if (keep_acts) trace->activations[l].h_in = h;
    cpu::rmsnorm_forward(xn.data(), h.data(), w.input_norm.data(), T, C, eps);
    cpu::linear_forward(q.data(), xn.data(), w.q_proj.data(), w.q_bias.empty() ? nullptr : w.q_bias.data(), T, C, H * D);
    cpu::linear_forward(k.data(), xn.data(), w.k_proj.data(), w.k_bias.empty() ? nullptr : w.k_bias.data(), T, C, G * D);
    cpu::linear_forward(v.data(), xn.data(), w.v_proj.data(), w.v_bias.empty() ? nullptr : w.v_bias.data(), T, C, G * D);
    const LoraLayer* lora = model.lora.enabled() && model.lora.layers[l].adapted ? &model.lora.layers[l] : nullptr;
    const float lora_scale = model.lora.enabled() ? model.lora.options.scale() : 0.0f;
    if (lora) {  // LoRA deltas of q, k, v (before the Qwen3 q/k norm)
      float* outputs[3] = {q.data(), k.data(), v.data()};
      for (LoraTarget t : {LoraTarget::q, LoraTarget::k, LoraTarget::v})
        if (lora->has(t))
          lora_forward(outputs[(int)t], xn.data(), lora->a(t), lora->b(t), lora_scale, T, C,
                       lora_out_features(model, t));
    }
    if (!w.q_norm.empty()) {  // Qwen3: RMSNorm over each head's D channels, before RoPE
      if (keep_acts) {
        trace->activations[l].q_raw = q;
        trace->activations[l].k_raw = k;
      }
      cpu::rmsnorm_forward(q.data(), q.data(), w.q_norm.data(), T * H, D, eps);
      cpu::rmsnorm_forward(k.data(), k.data(), w.k_norm.data(), T * G, D, eps);
    }
    mixers::MixerInputs in;
    in.T = T;
    in.pos0 = pos0;
    in.x = xn.data();
    in.q = q.data();
    in.k = k.data();
    in.v = v.data();
    in.inv_freq = model.inv_freq.data();
    if (row_caches) {
      for (int t = 0; t < T; ++t) {
        mixers::MixerInputs row = in;
        row.T = 1;
        row.pos0 = row_caches[t]->position;
        row.x = xn.data() + (long)t * C;
        row.q = q.data() + (long)t * H * D;
        row.k = k.data() + (long)t * G * D;
        row.v = v.data() + (long)t * G * D;
        model.mixers[l]->forward_cached(*row_caches[t]->layers[l], row, y.data() + (long)t * H * D);
      }
    } else if (cache) {
      model.mixers[l]->forward_cached(*cache->layers[l], in, y.data());
    } else {
      model.mixers[l]->forward(in, y.data());
    }
    if (keep_io) trace->layers[l] = {xn, q, k, v, y};
    cpu::linear_forward(proj.data(), y.data(), w.o_proj.data(), w.o_bias.empty() ? nullptr : w.o_bias.data(), T, H * D, C);
    if (lora && lora->has(LoraTarget::o))
      lora_forward(proj.data(), y.data(), lora->a(LoraTarget::o), lora->b(LoraTarget::o), lora_scale, T, H * D, C);
    add_in_place(h.data(), proj.data(), (long)T * C);
    if (keep_acts) trace->activations[l].h_mid = h;

    cpu::rmsnorm_forward(xn.data(), h.data(), w.post_norm.data(), T, C, eps);
    cpu::linear_forward(gate.data(), xn.data(), w.gate_proj.data(), nullptr, T, C, F);
    cpu::linear_forward(up.data(), xn.data(), w.up_proj.data(), nullptr, T, C, F);
    if (keep_acts) {
      trace->activations[l].xn2 = xn;
      trace->activations[l].gate = gate;
      trace->activations[l].up = up;
    }
    cpu::swiglu_forward(gate.data(), gate.data(), up.data(), (long)T * F);
    cpu::linear_forward(proj.data(), gate.data(), w.down_proj.data(), nullptr, T, F, C);
    add_in_place(h.data(), proj.data(), (long)T * C);
    if (trace && trace->capture_hidden && l + 1 < c.num_layers) trace->hidden.push_back(h);
  }
  if (keep_acts) trace->h_final = h;
  cpu::rmsnorm_forward(h.data(), h.data(), model.final_norm.data(), T, C, eps);
  if (trace && trace->capture_hidden) trace->hidden.push_back(h);
  if (keep_acts) trace->h_normed = h;
  const int first = last_only ? T - 1 : 0;
  if (logits)
    cpu::linear_forward(logits, h.data() + (long)first * C, model.lm_head_weights(), nullptr,
                        T - first, C, V);
  if (cache) cache->position += T;
  if (row_caches)
    for (int t = 0; t < T; ++t) row_caches[t]->position += 1;
}

}  // namespace

void model_forward(const Model& model, const int32_t* ids, int T, float* logits, bool last_only,
                   ForwardTrace* trace) {
  forward_tokens(model, ids, T, 0, nullptr, logits, last_only, trace);
}

void model_forward_cached(const Model& model, SequenceCache& cache, const int32_t* ids, int T,
                          float* logits, bool last_only) {
  forward_tokens(model, ids, T, cache.position, &cache, logits, last_only, nullptr);
}

void model_decode_batch(const Model& model, SequenceCache* const* caches, const int32_t* ids, int B,
                        float* logits) {
  const long V = model.config.vocab_size;
  for (int b = 0; b < B; b += kDecodeBatchRows) {
    const int n = std::min(kDecodeBatchRows, B - b);
    forward_tokens(model, ids + b, n, 0, nullptr, logits + b * V, false, nullptr, caches + b);
  }
}

float log_softmax_at(const float* row, int V, int32_t id) {
  const float m = *std::max_element(row, row + V);
  double sum = 0.0;
  for (int i = 0; i < V; ++i) sum += std::exp((double)row[i] - m);
  return (float)(row[id] - m - std::log(sum));
}

std::vector<float> logprobs_of_next_tokens(const float* logits, const int32_t* ids, int T, int V) {
  std::vector<float> out(T > 0 ? T - 1 : 0);
#pragma omp parallel for schedule(static)
  for (int t = 0; t < T - 1; ++t) out[t] = log_softmax_at(logits + (long)t * V, V, ids[t + 1]);
  return out;
}

}  // namespace golinear
