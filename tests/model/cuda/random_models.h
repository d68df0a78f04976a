// Small random models for the GPU tests (model, runtime, eval, analysis): built in-process at
// head_dim 64 (the CUDA attention kernels compile 64 and 128; the fixtures' own head dims are 16
// and 32), the same host weights feeding the CPU model and its GPU upload. small_llama_config:
// C 256, H 4, G 2, D 64, F 512, V 1024, L 2; random_model honours the config's family switches
// (Qwen2's qkv bias, Qwen3's q/k norm).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "mixers/mixer_factory.h"
#include "mixers/softmax_mixer.h"
#include "model/linearization.h"
#include "model/transformer.h"

namespace golinear::test {

// The small shape, keeping the config's family switches: C 256, H 4, G 2, D 64, F 512, V 1024,
// L 2, 4096 positions.
inline void set_small_shape(ModelConfig& c) {
  c.hidden_size = 256;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.intermediate_size = 512;
  c.vocab_size = 1024;
  c.num_layers = 2;
  c.max_position_embeddings = 4096;
}

inline ModelConfig small_llama_config() {
  ModelConfig c;
  c.family = ModelFamily::llama;
  c.rope.theta = 1e4;
  c.rms_norm_eps = 1e-5;
  set_small_shape(c);
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  return c;
}

// Random fp32 weights with O(1) activations; every layer softmax.
inline std::unique_ptr<Model> random_model(const ModelConfig& c, uint64_t seed) {
  auto m = std::make_unique<Model>();
  m->config = c;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto mat = [&](long rows, long cols) {
    std::vector<float> w(rows * cols);
    const float s = 1.0f / std::sqrt((float)cols);
    for (auto& x : w) x = s * normal(rng);
    return w;
  };
  auto norm = [&](long n) {
    std::vector<float> w(n);
    for (auto& x : w) x = 1.0f + 0.2f * uni(rng);
    return w;
  };
  auto bias = [&](long n) {
    std::vector<float> w(n);
    for (auto& x : w) x = 0.1f * uni(rng);
    return w;
  };
  const long C = c.hidden_size, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim,
             F = c.intermediate_size, V = c.vocab_size;
  m->embed.resize(V * C);
  for (auto& x : m->embed) x = normal(rng);
  if (!c.tie_word_embeddings) m->lm_head = mat(V, C);
  m->final_norm = norm(C);
  m->layers.resize(c.num_layers);
  for (auto& w : m->layers) {
    w.input_norm = norm(C);
    w.q_proj = mat(H * D, C);
    w.k_proj = mat(G * D, C);
    w.v_proj = mat(G * D, C);
    if (c.qkv_bias) {
      w.q_bias = bias(H * D);
      w.k_bias = bias(G * D);
      w.v_bias = bias(G * D);
    }
    if (c.qk_norm) {
      w.q_norm = norm(D);
      w.k_norm = norm(D);
    }
    w.o_proj = mat(C, H * D);
    w.post_norm = norm(C);
    w.gate_proj = mat(F, C);
    w.up_proj = mat(F, C);
    w.down_proj = mat(C, F);
  }
  m->inv_freq = rope_inverse_frequencies(c.rope, (int)D);
  for (int l = 0; l < c.num_layers; ++l)
    m->mixers.push_back(std::make_unique<mixers::SoftmaxMixer>(m->attention_shape()));
  return m;
}

// The default recipe (gdn, gate, conv) with sinks 4, window 12 (the linear branch is read from
// token 16 on) on the layers not in keep_full, every parameter perturbed away from its init.
inline MixerStack linearized_stack(const Model& m, const std::vector<int>& keep_full, uint64_t seed,
                                   mixers::MixerOptions* options_out = nullptr) {
  mixers::MixerOptions o;
  o.sinks = 4;
  o.window = 12;
  if (options_out) *options_out = o;
  auto stack = linearized_mixers(m, o, keep_full, seed);
  EXPECT_TRUE(stack.ok()) << stack.error();
  if (!stack.ok()) return {};
  std::mt19937_64 rng(seed + 99);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& mixer : *stack)
    for (mixers::Parameter* p : mixer->parameters()) {
      const float scale = p->name == "b_lambda" ? 1.0f : p->name.rfind("w_", 0) == 0 ? 0.05f : 0.1f;
      for (auto& x : p->value) x += scale * normal(rng);
    }
  return std::move(*stack);
}

inline std::vector<int32_t> test_tokens(int T, int V, uint64_t seed) {
  std::vector<int32_t> ids(T);
  for (int t = 0; t < T; ++t) ids[t] = (int32_t)((t * 7919 + seed * 104729 + 3) % V);
  return ids;
}

inline int argmax_of(const float* x, int n) { return (int)(std::max_element(x, x + n) - x); }

}  // namespace golinear::test
