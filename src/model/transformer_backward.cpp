#include "model/transformer_backward.h"

#include <algorithm>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/norm.h"

namespace golinear {

namespace cpu = kernels::cpu;

void model_backward(Model& model, int T, const ForwardTrace& trace, const float* dlogits) {
  const ModelConfig& c = model.config;
  const int C = c.hidden_size, F = c.intermediate_size, V = c.vocab_size;
  const int H = c.num_heads, G = c.num_kv_heads, D = c.head_dim;
  const float eps = (float)c.rms_norm_eps;
  const long TC = (long)T * C, TF = (long)T * F, TQ = (long)T * H * D, TK = (long)T * G * D;

  std::vector<float> dh(TC, 0.0f), dnormed(TC, 0.0f);  // dh: gradient of the residual stream
  cpu::linear_backward(dnormed.data(), nullptr, nullptr, dlogits, trace.h_normed.data(),
                       model.lm_head_weights(), T, C, V);
  cpu::rmsnorm_backward(dh.data(), nullptr, dnormed.data(), trace.h_final.data(),
                        model.final_norm.data(), T, C, eps);

  std::vector<float> dact(TF), dgate(TF), dup(TF), act(TF), dxn(TC), dy(TQ), dq(TQ), dk(TK), dv(TK),
      draw(std::max(TQ, TK));
  for (int l = c.num_layers - 1; l >= 0; --l) {
    const LayerWeights& w = model.layers[l];
    const ForwardTrace::Activations& a = trace.activations[l];
    const ForwardTrace::Layer& io = trace.layers[l];

    // MLP: h_out = h_mid + down(silu(gate) ⊙ up), gate/up of xn2 = rmsnorm(h_mid).
    std::fill(dact.begin(), dact.end(), 0.0f);
    cpu::linear_backward(dact.data(), nullptr, nullptr, dh.data(), nullptr, w.down_proj.data(), T, F, C);
    std::fill(dgate.begin(), dgate.end(), 0.0f);
    std::fill(dup.begin(), dup.end(), 0.0f);
    cpu::swiglu_backward(dgate.data(), dup.data(), dact.data(), a.gate.data(), a.up.data(), TF);
    std::fill(dxn.begin(), dxn.end(), 0.0f);
    cpu::linear_backward(dxn.data(), nullptr, nullptr, dgate.data(), nullptr, w.gate_proj.data(), T, C, F);
    cpu::linear_backward(dxn.data(), nullptr, nullptr, dup.data(), nullptr, w.up_proj.data(), T, C, F);
    cpu::rmsnorm_backward(dh.data(), nullptr, dxn.data(), a.h_mid.data(), w.post_norm.data(), T, C, eps);

    // Attention block: h_mid = h_in + o_proj(mixer(xn, q, k, v)), xn = rmsnorm(h_in).
    std::fill(dy.begin(), dy.end(), 0.0f);
    cpu::linear_backward(dy.data(), nullptr, nullptr, dh.data(), nullptr, w.o_proj.data(), T, H * D, C);
    LoraLayer* lora = model.lora.enabled() && model.lora.layers[l].adapted ? &model.lora.layers[l] : nullptr;
    const float lora_scale = model.lora.enabled() ? model.lora.options.scale() : 0.0f;
    auto lora_backward_of = [&](LoraTarget t, float* dx, const float* x, const float* dout) {
      if (lora && lora->has(t))
        lora_backward(dx, x, dout, lora->A[(int)t], lora->B[(int)t], lora_scale, T,
                      lora_in_features(model, t), lora_out_features(model, t));
    };
    lora_backward_of(LoraTarget::o, dy.data(), io.y.data(), dh.data());
    std::fill(dxn.begin(), dxn.end(), 0.0f);
    std::fill(dq.begin(), dq.end(), 0.0f);
    std::fill(dk.begin(), dk.end(), 0.0f);
    std::fill(dv.begin(), dv.end(), 0.0f);
    const mixers::MixerInputs in = io.inputs(T, model.inv_freq.data());
    model.mixers[l]->backward(in, dy.data(), {dxn.data(), dq.data(), dk.data(), dv.data()});
    if (!w.q_norm.empty()) {  // Qwen3: per-head RMSNorm of q and k
      std::fill(draw.begin(), draw.begin() + TQ, 0.0f);
      cpu::rmsnorm_backward(draw.data(), nullptr, dq.data(), a.q_raw.data(), w.q_norm.data(), T * H, D, eps);
      std::copy(draw.begin(), draw.begin() + TQ, dq.begin());
      std::fill(draw.begin(), draw.begin() + TK, 0.0f);
      cpu::rmsnorm_backward(draw.data(), nullptr, dk.data(), a.k_raw.data(), w.k_norm.data(), T * G, D, eps);
      std::copy(draw.begin(), draw.begin() + TK, dk.begin());
    }
    lora_backward_of(LoraTarget::q, dxn.data(), io.x.data(), dq.data());
    lora_backward_of(LoraTarget::k, dxn.data(), io.x.data(), dk.data());
    lora_backward_of(LoraTarget::v, dxn.data(), io.x.data(), dv.data());
    cpu::linear_backward(dxn.data(), nullptr, nullptr, dq.data(), nullptr, w.q_proj.data(), T, C, H * D);
    cpu::linear_backward(dxn.data(), nullptr, nullptr, dk.data(), nullptr, w.k_proj.data(), T, C, G * D);
    cpu::linear_backward(dxn.data(), nullptr, nullptr, dv.data(), nullptr, w.v_proj.data(), T, C, G * D);
    cpu::rmsnorm_backward(dh.data(), nullptr, dxn.data(), a.h_in.data(), w.input_norm.data(), T, C, eps);
  }
}

}  // namespace golinear
