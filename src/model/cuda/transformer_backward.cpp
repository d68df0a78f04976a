// The backward of the frozen transformer on the GPU (transformer_backward.h), in the order of
// model/transformer_backward.cpp: LM head, final norm, then per layer from the top the MLP
// (down, SwiGLU, [gate; up], post-attention norm, residual) and the attention block (o_proj, the
// mixer, q/k norm, [q; k; v], input norm, residual).
#include "model/cuda/transformer_backward.h"

#include "kernels/cuda/activation.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rope.h"

namespace golinear::model::cuda {

namespace kc = kernels::cuda;

Result<std::unique_ptr<GpuBackwardScratch>> GpuBackwardScratch::create(const GpuModel& model,
                                                                       int T) {
  const ModelConfig& c = model.config();
  const size_t t = T, C = c.hidden_size, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim,
               F = c.intermediate_size, V = c.vocab_size;
  const size_t HD = H * D, GD = G * D, QKV = HD + 2 * GD;
  auto s = std::unique_ptr<GpuBackwardScratch>(new GpuBackwardScratch());
  s->T_ = T;
  DeviceArena& a = s->memory_;
  GL_ASSIGN_OR_RETURN(s->dh, a.alloc<float>(t * C));
  GL_ASSIGN_OR_RETURN(s->dtmp, a.alloc<float>(t * C));
  GL_ASSIGN_OR_RETURN(s->dx_mix, a.alloc<float>(t * C));
  GL_ASSIGN_OR_RETURN(s->dact, a.alloc<float>(t * F));
  GL_ASSIGN_OR_RETURN(s->dy, a.alloc<float>(t * HD));
  GL_ASSIGN_OR_RETURN(s->dq, a.alloc<float>(t * HD));
  GL_ASSIGN_OR_RETURN(s->dqr, a.alloc<float>(t * HD));
  GL_ASSIGN_OR_RETURN(s->dqn, a.alloc<float>(t * HD));
  GL_ASSIGN_OR_RETURN(s->dk, a.alloc<float>(t * GD));
  GL_ASSIGN_OR_RETURN(s->dkr, a.alloc<float>(t * GD));
  GL_ASSIGN_OR_RETURN(s->dkn, a.alloc<float>(t * GD));
  GL_ASSIGN_OR_RETURN(s->dv, a.alloc<float>(t * GD));
  GL_ASSIGN_OR_RETURN(s->dlogits_bf, a.alloc<bf16>(t * V));
  GL_ASSIGN_OR_RETURN(s->dh_bf, a.alloc<bf16>(t * C));
  GL_ASSIGN_OR_RETURN(s->dgu, a.alloc<bf16>(t * 2 * F));
  GL_ASSIGN_OR_RETURN(s->dqkv, a.alloc<bf16>(t * QKV));
  s->attn_ws_bytes = kc::attention_backward_workspace_bytes(T, (int)H, (int)G, (int)D);
  GL_ASSIGN_OR_RETURN(s->attn_ws, a.alloc_bytes(s->attn_ws_bytes));
  if (model.lora()) {
    GL_ASSIGN_OR_RETURN(s->lora, model.lora()->scratch_allocate(a, T));
    s->lora_rank = model.lora()->rank();
  }
  return s;
}

Status gpu_model_backward(GpuModel& model, const GpuActivations& acts, const float* dlogits,
                          const GpuMixerBackward& mixer_backward, GpuBackwardScratch& w) {
  const ModelConfig& c = model.config();
  const int T = acts.T, C = c.hidden_size, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim,
            F = c.intermediate_size, V = c.vocab_size;
  const int HD = H * D, GD = G * D, QKV = HD + 2 * GD;
  const float eps = (float)c.rms_norm_eps;
  if (w.T() != T) return make_error("gpu backward: scratch for ", w.T(), " tokens, activations for ", T);
  GpuLora* lora = model.lora();
  if (lora && (w.lora.T != T || w.lora_rank != lora->rank()))
    return make_error("gpu backward: the scratch was made without room for the model's LoRA adapters");
  cudaStream_t s = model.stream();
  cublasHandle_t cb = model.cublas();
  GL_TRY(kc::gemm_bind_stream(cb, s));
  // LM head (input gradient only) and the final norm.
  GL_TRY(kc::convert_f32_to_bf16(w.dlogits_bf, dlogits, (long)T * V, s));
  GL_TRY(kc::gemm_bf16_nn(cb, w.dtmp, 0.0f, w.dlogits_bf, model.lm_head(), T, C, V, s));
  GL_TRY(kc::rmsnorm_backward_f32(w.dh, false, w.dtmp, acts.h_final, model.final_norm(), T, C, eps, s));
  for (int l = c.num_layers - 1; l >= 0; --l) {
    const GpuLayer& L = model.layer(l);
    const GpuLayerActivations& A = acts.layers[l];
    // MLP: h_out = h_mid + down(silu(gate) ⊙ up), [gate; up] of rmsnorm(h_mid).
    GL_TRY(kc::convert_f32_to_bf16(w.dh_bf, w.dh, (long)T * C, s));
    GL_TRY(kc::gemm_bf16_nn(cb, w.dact, 0.0f, w.dh_bf, L.w_down, T, F, C, s));
    GL_TRY(kc::swiglu_stacked_backward(w.dgu, w.dact, A.gu, T, F, s));
    GL_TRY(kc::gemm_bf16_nn(cb, w.dtmp, 0.0f, w.dgu, L.w_gate_up, T, C, 2 * F, s));
    GL_TRY(kc::rmsnorm_backward_f32(w.dh, true, w.dtmp, A.h_mid, L.post_norm, T, C, eps, s));
    // Attention block: h_mid = h_in + o_proj(mixer(xn, q, k, v)), xn = rmsnorm(h_in).
    GL_TRY(kc::convert_f32_to_bf16(w.dh_bf, w.dh, (long)T * C, s));
    GL_TRY(kc::gemm_bf16_nn(cb, w.dy, 0.0f, w.dh_bf, L.w_o, T, HD, C, s));
    if (lora) GL_TRY(lora->backward_o(l, w.dy, w.dh_bf, A.y, w.lora, cb, s));
    if (L.hybrid) {
      GL_TRY(mixer_backward(l, w.dy, w.dx_mix, w.dq, w.dk, w.dv));
      GL_TRY(kc::gemm_bind_stream(cb, s));
    } else {
      GL_TRY(kc::attention_backward(w.dqr, w.dkr, w.dv, w.dy, A.y, A.lse, A.qr, A.kr, A.v, T, H, G,
                                    D, kc::AttentionMaskSpec{}, w.attn_ws, w.attn_ws_bytes, s));
      GL_CUDA_CHECK(cudaMemsetAsync(w.dq, 0, (size_t)T * HD * 4, s));
      GL_CUDA_CHECK(cudaMemsetAsync(w.dk, 0, (size_t)T * GD * 4, s));
      GL_TRY(kc::rope_backward_add_f32(w.dq, w.dqr, model.inv_freq(), T, H, D, 0, s));
      GL_TRY(kc::rope_backward_add_f32(w.dk, w.dkr, model.inv_freq(), T, G, D, 0, s));
    }
    const float* dq = w.dq;
    const float* dk = w.dk;
    if (L.q_norm) {  // Qwen3: per-head RMSNorm of q and k
      GL_TRY(kc::rmsnorm_backward_f32(w.dqn, false, w.dq, A.q_raw, L.q_norm, T * H, D, eps, s));
      GL_TRY(kc::rmsnorm_backward_f32(w.dkn, false, w.dk, A.k_raw, L.k_norm, T * G, D, eps, s));
      dq = w.dqn, dk = w.dkn;
    }
    GL_TRY(kc::pack_qkv_grad_bf16(w.dqkv, dq, dk, w.dv, T, HD, GD, s));
    GL_TRY(kc::gemm_bf16_nn(cb, w.dtmp, 0.0f, w.dqkv, L.w_qkv, T, C, QKV, s));
    if (lora) GL_TRY(lora->backward_qkv(l, w.dtmp, w.dqkv, A.xn, w.lora, cb, s));
    if (L.hybrid) GL_TRY(kc::add_f32(w.dtmp, w.dx_mix, (long)T * C, s));
    if (l > 0)  // below layer 0 is the frozen embedding: nothing to propagate
      GL_TRY(kc::rmsnorm_backward_f32(w.dh, true, w.dtmp, A.h_in, L.input_norm, T, C, eps, s));
  }
  return ok_status();
}

}  // namespace golinear::model::cuda
