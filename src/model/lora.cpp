#include "model/lora.h"

#include <cmath>
#include <random>
#include <sstream>
#include <utility>

#include "kernels/cpu/linear.h"
#include "model/transformer.h"

namespace golinear {

namespace cpu = kernels::cpu;

const char* to_string(LoraTarget target) {
  switch (target) {
    case LoraTarget::q: return "q";
    case LoraTarget::k: return "k";
    case LoraTarget::v: return "v";
    case LoraTarget::o: return "o";
  }
  return "?";
}

std::vector<std::string> LoraOptions::target_names() const {
  std::vector<std::string> names;
  for (int t = 0; t < kLoraTargets; ++t)
    if (targets[t]) names.push_back(to_string((LoraTarget)t));
  return names;
}

Status lora_options_validate(const LoraOptions& o) {
  if (o.rank < 1 || o.rank > 64) return make_error("LoRA rank must be in [1, 64], got ", o.rank);
  if (!(o.alpha > 0.0f) || !std::isfinite(o.alpha))
    return make_error("LoRA alpha must be a positive number, got ", o.alpha);
  bool any = false;
  for (bool t : o.targets) any = any || t;
  if (!any) return make_error("LoRA needs at least one target among q, k, v, o");
  return ok_status();
}

Result<std::array<bool, kLoraTargets>> lora_targets_parse(const std::string& text) {
  std::array<bool, kLoraTargets> targets = {false, false, false, false};
  std::stringstream in(text);
  std::string item;
  int count = 0;
  while (std::getline(in, item, ',')) {
    int found = -1;
    for (int t = 0; t < kLoraTargets; ++t)
      if (item == to_string((LoraTarget)t)) found = t;
    if (found < 0)
      return make_error("LoRA targets are a list of q, k, v, o like q,v; got '", text, "'");
    if (targets[found]) return make_error("LoRA target '", item, "' is listed twice in '", text, "'");
    targets[found] = true;
    ++count;
  }
  if (count == 0 || text.back() == ',')
    return make_error("LoRA targets are a list of q, k, v, o like q,v; got '", text, "'");
  return targets;
}

std::vector<mixers::Parameter*> LoraLayer::parameters() {
  std::vector<mixers::Parameter*> params;
  for (const mixers::Parameter* p : std::as_const(*this).parameters())
    params.push_back(const_cast<mixers::Parameter*>(p));  // this layer's own, non-const object
  return params;
}

std::vector<const mixers::Parameter*> LoraLayer::parameters() const {
  std::vector<const mixers::Parameter*> params;
  if (!adapted) return params;
  for (int t = 0; t < kLoraTargets; ++t)
    if (!A[t].value.empty()) {
      params.push_back(&A[t]);
      params.push_back(&B[t]);
    }
  return params;
}

std::vector<const mixers::Parameter*> LoraAdapters::parameters() const {
  std::vector<const mixers::Parameter*> params;
  for (const LoraLayer& layer : layers)
    for (const mixers::Parameter* p : layer.parameters()) params.push_back(p);
  return params;
}

std::vector<mixers::Parameter*> LoraAdapters::parameters() {
  std::vector<mixers::Parameter*> params;
  for (LoraLayer& layer : layers)
    for (mixers::Parameter* p : layer.parameters()) params.push_back(p);
  return params;
}

std::vector<std::pair<std::string, mixers::Parameter*>> LoraAdapters::named_parameters() {
  std::vector<std::pair<std::string, mixers::Parameter*>> named;
  for (size_t l = 0; l < layers.size(); ++l)
    for (mixers::Parameter* p : layers[l].parameters())
      named.emplace_back(str_cat("layers.", l, ".", p->name), p);
  return named;
}

std::vector<std::pair<std::string, const mixers::Parameter*>> LoraAdapters::named_parameters() const {
  std::vector<std::pair<std::string, const mixers::Parameter*>> named;
  for (auto& [name, p] : const_cast<LoraAdapters*>(this)->named_parameters()) named.emplace_back(name, p);
  return named;
}

int lora_in_features(const Model& model, LoraTarget t) {
  const ModelConfig& c = model.config;
  return t == LoraTarget::o ? c.num_heads * c.head_dim : c.hidden_size;
}

int lora_out_features(const Model& model, LoraTarget t) {
  const ModelConfig& c = model.config;
  switch (t) {
    case LoraTarget::q: return c.num_heads * c.head_dim;
    case LoraTarget::k:
    case LoraTarget::v: return c.num_kv_heads * c.head_dim;
    case LoraTarget::o: return c.hidden_size;
  }
  return 0;
}

Result<LoraAdapters> lora_create(const Model& model, const LoraOptions& options,
                                 const std::vector<bool>& adapted, uint64_t seed) {
  GL_TRY(lora_options_validate(options));
  const int L = model.config.num_layers, r = options.rank;
  if ((int)adapted.size() != L)
    return make_error("LoRA: ", adapted.size(), " layer flags for a model of ", L, " layers");
  LoraAdapters lora;
  lora.options = options;
  lora.layers.resize(L);
  for (int l = 0; l < L; ++l) {
    LoraLayer& layer = lora.layers[l];
    layer.adapted = adapted[l];
    if (!adapted[l]) continue;
    // PEFT: kaiming_uniform_(A, a=√5), i.e. bound = √(6 / ((1 + 5)·in)) = 1/√in.
    std::mt19937_64 engine(seed + (uint64_t)l);
    for (int t = 0; t < kLoraTargets; ++t) {
      if (!options.targets[t]) continue;
      const int in = lora_in_features(model, (LoraTarget)t), out = lora_out_features(model, (LoraTarget)t);
      const std::string p = to_string((LoraTarget)t);
      mixers::Parameter& A = layer.A[t];
      mixers::Parameter& B = layer.B[t];
      A.name = str_cat("lora_", p, "_A");
      A.shape = {r, in};
      A.value.resize((size_t)r * in);
      const double bound = 1.0 / std::sqrt((double)in);
      for (float& a : A.value) a = (float)(bound * (2.0 * (((engine() >> 11) + 0.5) * 0x1.0p-53) - 1.0));
      A.grad.assign(A.value.size(), 0.0f);
      B.name = str_cat("lora_", p, "_B");
      B.shape = {out, r};
      B.value.assign((size_t)out * r, 0.0f);
      B.grad.assign(B.value.size(), 0.0f);
    }
  }
  return lora;
}

void lora_forward(float* y, const float* x, const mixers::Parameter& A, const mixers::Parameter& B,
                  float s, int T, int in, int out) {
  const int r = (int)A.shape[0];
  std::vector<float> u((size_t)T * r), delta((size_t)T * out);
  cpu::linear_forward(u.data(), x, A.value.data(), nullptr, T, in, r);          // u = x Aᵀ
  cpu::linear_forward(delta.data(), u.data(), B.value.data(), nullptr, T, r, out);  // u Bᵀ
  for (size_t i = 0; i < delta.size(); ++i) y[i] += s * delta[i];
}

void lora_backward(float* dx, const float* x, const float* dy, mixers::Parameter& A,
                   mixers::Parameter& B, float s, int T, int in, int out) {
  const int r = (int)A.shape[0];
  std::vector<float> u((size_t)T * r), sdy((size_t)T * out), du((size_t)T * r, 0.0f);
  cpu::linear_forward(u.data(), x, A.value.data(), nullptr, T, in, r);
  for (size_t i = 0; i < sdy.size(); ++i) sdy[i] = s * dy[i];
  // y += (s·dy)-side: B.grad += (s·dy)ᵀ u, du = (s·dy) B; then A.grad += duᵀ x, dx += du A.
  cpu::linear_backward(du.data(), B.grad.data(), nullptr, sdy.data(), u.data(), B.value.data(), T, r, out);
  cpu::linear_backward(dx, A.grad.data(), nullptr, du.data(), x, A.value.data(), T, in, r);
}

void lora_merge_into_weights(Model& model) {
  if (!model.lora.enabled()) return;
  const float s = model.lora.options.scale();
  for (size_t l = 0; l < model.lora.layers.size(); ++l) {
    const LoraLayer& layer = model.lora.layers[l];
    LayerWeights& w = model.layers[l];
    std::vector<float>* weights[kLoraTargets] = {&w.q_proj, &w.k_proj, &w.v_proj, &w.o_proj};
    for (int t = 0; t < kLoraTargets; ++t) {
      if (!layer.has((LoraTarget)t)) continue;
      const mixers::Parameter& A = layer.A[t];
      const mixers::Parameter& B = layer.B[t];
      const int r = (int)A.shape[0], in = (int)A.shape[1], out = (int)B.shape[0];
      // ΔW (out, in) = B (out, r) · A (r, in), as linear_forward(x = B, w = Aᵀ (in, r)).
      std::vector<float> At((size_t)in * r), delta((size_t)out * in);
      for (int j = 0; j < r; ++j)
        for (int i = 0; i < in; ++i) At[(size_t)i * r + j] = A.value[(size_t)j * in + i];
      cpu::linear_forward(delta.data(), B.value.data(), At.data(), nullptr, out, r, in);
      float* W = weights[t]->data();  // (out, in)
      for (size_t i = 0; i < delta.size(); ++i) W[i] += s * delta[i];
    }
  }
  model.lora = LoraAdapters{};
}

}  // namespace golinear
