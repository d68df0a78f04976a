// The GPU hybrid layer's training forward and backward (gpu_hybrid_layer.h), composed from the
// kernels of kernels/cuda. Stages, as in mixers/hybrid_mixer.cpp:
//   1 short conv      q, k, v → q̃, k̃, ṽ                          short_conv_forward / _backward
//   2 exact branch    RoPE, softmax over sinks ∪ window (+ lse)    attention_forward / _backward
//   3 linear branch   q̂, k̂ (unit rows), g, β from the gate GEMM,   gated_delta_chunked_forward /
//                     GDN with the delayed read (pointer shift)    gated_delta_backward
//   4 mix gate        y = (1 − λ) y_exact + λ y_lin                mix_gate_forward_f32 / _backward
#include "mixers/cuda/gpu_hybrid_layer.h"

#include <algorithm>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/backbone_backward.h"
#include "kernels/cuda/gated_delta.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/hybrid.h"
#include "kernels/cuda/hybrid_train.h"

namespace golinear::mixers::cuda {

namespace kc = kernels::cuda;

namespace {

constexpr int kConvWidth = 4;

size_t align_up(size_t x) { return (x + 255) / 256 * 256; }

}  // namespace

Status gpu_hybrid_check_recipe(const MixerOptions& o, const AttentionShape& shape) {
  if (o.kind != MixerKind::gdn || o.mix != MixKind::gate || !o.conv || o.linear_rope ||
      o.sinks + o.window <= 0)
    return make_error("the GPU trainer supports the default recipe only (--mixer gdn --mix gate, conv "
                      "on, no --linear-rope, sinks + window > 0); got mixer ", to_string(o.kind),
                      ", mix ", to_string(o.mix), o.conv ? "" : ", no conv",
                      o.linear_rope ? ", linear rope" : "", "; use --device cpu");
  if (shape.D != 64 && shape.D != 128)
    return make_error("the GPU trainer supports head dim 64 or 128, the model has ", shape.D,
                      "; use --device cpu");
  if (shape.G <= 0 || shape.H % shape.G != 0)
    return make_error("the GPU trainer needs kv heads dividing the query heads (", shape.H, ", ",
                      shape.G, ")");
  return ok_status();
}

std::vector<GpuParamSlot> gpu_hybrid_layout(const AttentionShape& s) {
  const long H = s.H, C = s.C, HD = (long)s.H * s.D, GD = (long)s.G * s.D;
  std::vector<GpuParamSlot> out;
  long offset = 0;
  auto add = [&](const char* name, long count) {
    out.push_back({name, offset, count});
    offset += count;
  };
  add("w_a", H * C);
  add("w_b", H * C);
  add("w_lambda", H * C);
  add("conv_q", HD * kConvWidth);
  add("conv_k", GD * kConvWidth);
  add("conv_v", GD * kConvWidth);
  add("b_beta", H);
  add("A_log", H);
  add("dt_bias", H);
  add("b_lambda", H);
  return out;
}

long gpu_hybrid_parameter_count(const AttentionShape& shape) {
  const auto layout = gpu_hybrid_layout(shape);
  return layout.back().offset + layout.back().count;
}

// ---- scratch -----------------------------------------------------------------------------------

Status GpuHybridScratch::allocate(const AttentionShape& sh, const MixerOptions& o, int T) {
  const size_t tq = (size_t)T * sh.H * sh.D, tk = (size_t)T * sh.G * sh.D, th = (size_t)T * sh.H;
  const int N = std::max(1, T - o.sinks - o.window);
  gdn_forward_bytes = kc::gated_delta_forward_workspace_bytes(N, sh.H, sh.D, false);
  gdn_backward_bytes = kc::gated_delta_backward_workspace_bytes(N, sh.H, sh.D);
  attn_backward_bytes = kc::attention_backward_workspace_bytes(T, sh.H, sh.G, sh.D);
  nmse_bytes = kc::nmse_workspace_bytes();
  // Two passes over the same carving: the first counts, the second assigns.
  char* base = nullptr;
  size_t used = 0;
  auto take = [&](size_t bytes) -> void* {
    void* p = base ? base + used : nullptr;
    used += align_up(std::max<size_t>(bytes, 1));
    return p;
  };
  for (int pass = 0; pass < 2; ++pass) {
    used = 0;
    qc = (bf16*)take(tq * 2), kc = (bf16*)take(tk * 2), vc = (bf16*)take(tk * 2);
    qr = (bf16*)take(tq * 2), kr = (bf16*)take(tk * 2);
    qn = (bf16*)take(tq * 2), kn = (bf16*)take(tk * 2);
    y_exact = (bf16*)take(tq * 2);
    lse = (float*)take(th * 4);
    logits = (float*)take(3 * th * 4);
    g = (float*)take(th * 4), beta = (float*)take(th * 4), lambda = (float*)take(th * 4);
    y_lin = (bf16*)take(tq * 2);
    y = (float*)take(tq * 4);
    dy = (float*)take(tq * 4);
    dy_exact = (float*)take(tq * 4);
    dy_lin = (bf16*)take(tq * 2);
    dlogits = (float*)take(3 * th * 4);
    dqn = (float*)take(tq * 4), dkn = (float*)take(tk * 4), dv_lin = (float*)take(tk * 4);
    dg = (float*)take(th * 4), dbeta = (float*)take(th * 4);
    dqr = (float*)take(tq * 4), dkr = (float*)take(tk * 4), dv = (float*)take(tk * 4);
    dqc = (float*)take(tq * 4), dkc = (float*)take(tk * 4);
    x_f32 = (float*)take((size_t)T * sh.C * 4);
    conv_dx = (float*)take(tq * 4);
    loss_sums = (double*)take(2 * sizeof(double));
    gdn_forward_ws = take(gdn_forward_bytes);
    gdn_backward_ws = take(gdn_backward_bytes);
    attn_backward_ws = take(attn_backward_bytes);
    nmse_ws = take(nmse_bytes);
    if (pass == 0) {
      GL_TRY(memory_.allocate(used));
      base = memory_.get();
    }
  }
  T_ = T;
  return ok_status();
}

// ---- layer -------------------------------------------------------------------------------------

Result<GpuHybridLayer> GpuHybridLayer::create(const MixerOptions& options,
                                              const AttentionShape& shape,
                                              const std::vector<float>& inv_freq, float* value,
                                              float* grad) {
  GL_TRY(gpu_hybrid_check_recipe(options, shape));
  if ((int)inv_freq.size() != shape.D / 2)
    return make_error("GpuHybridLayer: inv_freq has ", inv_freq.size(), " values, expected ", shape.D / 2);
  GpuHybridLayer layer;
  layer.options_ = options;
  layer.shape_ = shape;
  layer.layout_ = gpu_hybrid_layout(shape);
  layer.value_ = value;
  layer.grad_ = grad;
  GL_TRY(layer.w_gates_.allocate((size_t)3 * shape.H * shape.C));
  GL_TRY(layer.inv_freq_.allocate(inv_freq.size()));
  GL_CUDA_CHECK(cudaMemcpy(layer.inv_freq_.get(), inv_freq.data(), inv_freq.size() * 4,
                           cudaMemcpyHostToDevice));
  return layer;
}

const float* GpuHybridLayer::param(const char* name) const {
  for (const GpuParamSlot& s : layout_)
    if (s.name == name) return value_ + s.offset;
  return nullptr;
}

float* GpuHybridLayer::grad_of(const char* name) const {
  for (const GpuParamSlot& s : layout_)
    if (s.name == name) return grad_ + s.offset;
  return nullptr;
}

namespace {

// The CPU mixer's parameter of each slot, checked by name and size.
Result<std::vector<Parameter*>> matching_parameters(Mixer& mixer,
                                                    const std::vector<GpuParamSlot>& layout) {
  std::vector<Parameter*> out;
  std::vector<Parameter*> params = mixer.parameters();
  for (const GpuParamSlot& slot : layout) {
    Parameter* found = nullptr;
    for (Parameter* p : params)
      if (p->name == slot.name) found = p;
    if (!found || (long)found->value.size() != slot.count)
      return make_error("GPU hybrid layer: the CPU mixer (", mixer.kind(), ") has no parameter '",
                        slot.name, "' of ", slot.count, " values");
    out.push_back(found);
  }
  if (params.size() != layout.size())
    return make_error("GPU hybrid layer: the CPU mixer has ", params.size(), " parameters, the GPU layout ",
                      layout.size());
  return out;
}

}  // namespace

Status GpuHybridLayer::upload(Mixer& mixer, cudaStream_t stream) {
  GL_ASSIGN_OR_RETURN(std::vector<Parameter*> params, matching_parameters(mixer, layout_));
  for (size_t i = 0; i < layout_.size(); ++i)
    GL_CUDA_CHECK(cudaMemcpyAsync(value_ + layout_[i].offset, params[i]->value.data(),
                                  layout_[i].count * 4, cudaMemcpyHostToDevice, stream));
  GL_TRY(refresh_gates(stream));
  GL_CUDA_CHECK(cudaStreamSynchronize(stream));
  return ok_status();
}

Status GpuHybridLayer::download(Mixer& mixer, cudaStream_t stream) const {
  GL_ASSIGN_OR_RETURN(std::vector<Parameter*> params, matching_parameters(mixer, layout_));
  for (size_t i = 0; i < layout_.size(); ++i)
    GL_CUDA_CHECK(cudaMemcpyAsync(params[i]->value.data(), value_ + layout_[i].offset,
                                  layout_[i].count * 4, cudaMemcpyDeviceToHost, stream));
  GL_CUDA_CHECK(cudaStreamSynchronize(stream));
  return ok_status();
}

Status GpuHybridLayer::download_grads(Mixer& mixer, cudaStream_t stream) const {
  GL_ASSIGN_OR_RETURN(std::vector<Parameter*> params, matching_parameters(mixer, layout_));
  for (size_t i = 0; i < layout_.size(); ++i)
    GL_CUDA_CHECK(cudaMemcpyAsync(params[i]->grad.data(), grad_ + layout_[i].offset,
                                  layout_[i].count * 4, cudaMemcpyDeviceToHost, stream));
  GL_CUDA_CHECK(cudaStreamSynchronize(stream));
  return ok_status();
}

Status GpuHybridLayer::refresh_gates(cudaStream_t stream) {
  // w_a, w_b, w_lambda are the first 3H·C floats of the block, in that order.
  return kc::convert_f32_to_bf16(w_gates_.get(), value_, (long)3 * shape_.H * shape_.C, stream);
}

Status GpuHybridLayer::forward(GpuHybridScratch& s, const bf16* x, const bf16* q, const bf16* k,
                               const bf16* v, cublasHandle_t cublas, cudaStream_t stream) const {
  const int T = s.T(), C = shape_.C, H = shape_.H, G = shape_.G, D = shape_.D;
  const int sinks = options_.sinks, window = options_.window, shift = sinks + window;
  const size_t tq = (size_t)T * H * D, tk = (size_t)T * G * D;
  // 1 short conv
  GL_TRY(kc::short_conv_forward(s.qc, q, param("conv_q"), T, H * D, stream));
  GL_TRY(kc::short_conv_forward(s.kc, k, param("conv_k"), T, G * D, stream));
  GL_TRY(kc::short_conv_forward(s.vc, v, param("conv_v"), T, G * D, stream));
  // 2 exact branch
  GL_CUDA_CHECK(cudaMemcpyAsync(s.qr, s.qc, tq * 2, cudaMemcpyDeviceToDevice, stream));
  GL_CUDA_CHECK(cudaMemcpyAsync(s.kr, s.kc, tk * 2, cudaMemcpyDeviceToDevice, stream));
  GL_TRY(kc::rope_apply(s.qr, inv_freq_.get(), T, H, D, 0, 1, stream));
  GL_TRY(kc::rope_apply(s.kr, inv_freq_.get(), T, G, D, 0, 1, stream));
  GL_TRY(kc::attention_forward(s.y_exact, s.lse, s.qr, s.kr, s.vc, T, H, G, D,
                               kc::AttentionMaskSpec{sinks, window}, stream));
  // 3 linear branch: features, gates, GDN with the delayed read (keys from row s, queries from
  //   row s + w; queries before s + w read the zero state).
  GL_TRY(kc::unit_rows_forward(s.qn, s.qc, (long)T * H, D, stream));
  GL_TRY(kc::unit_rows_forward(s.kn, s.kc, (long)T * G, D, stream));
  GL_TRY(kc::gemm_bf16_nt(cublas, s.logits, false, x, w_gates_.get(), T, 3 * H, C, stream));
  GL_TRY(kc::hybrid_gates_forward(s.g, s.beta, s.lambda, s.logits, param("A_log"),
                                  param("dt_bias"), param("b_beta"), param("b_lambda"), T, H,
                                  stream));
  GL_CUDA_CHECK(cudaMemsetAsync(s.y_lin, 0, tq * 2, stream));
  if (T > shift) {
    const int N = T - shift;
    GL_TRY(kc::gated_delta_chunked_forward(
        s.y_lin + (size_t)shift * H * D, nullptr, nullptr, s.qn + (size_t)shift * H * D,
        s.kn + (size_t)sinks * G * D, s.vc + (size_t)sinks * G * D, s.g + (size_t)sinks * H,
        s.beta + (size_t)sinks * H, N, H, G, D, s.gdn_forward_ws, s.gdn_forward_bytes, stream));
  }
  // 4 mix gate
  return kc::mix_gate_forward_f32(s.y, s.y_exact, s.y_lin, s.lambda, T, H, D, stream);
}

Status GpuHybridLayer::backward(GpuHybridScratch& s, const bf16* x, const bf16* q, const bf16* k,
                                const bf16* v, cublasHandle_t cublas, cudaStream_t stream) {
  return backward(s, x, q, k, v, cublas, stream, nullptr, nullptr, nullptr, nullptr);
}

Status GpuHybridLayer::backward(GpuHybridScratch& s, const bf16* x, const bf16* q, const bf16* k,
                                const bf16* v, cublasHandle_t cublas, cudaStream_t stream,
                                float* dx, float* dq, float* dk, float* dv) {
  const int T = s.T(), C = shape_.C, H = shape_.H, G = shape_.G, D = shape_.D;
  const int sinks = options_.sinks, window = options_.window, shift = sinks + window;
  const size_t tq = (size_t)T * H * D, tk = (size_t)T * G * D, th = (size_t)T * H;
  // 4 mix gate: dy → dy_exact, dy_lin and the λ-logit gradients.
  GL_TRY(kc::mix_gate_backward(s.dy_exact, s.dy_lin, s.dlogits, s.dy, s.y_exact, s.y_lin,
                               s.lambda, T, H, D, stream));
  // 3 linear branch: the GDN backward writes only the rows its shifted pointers cover.
  GL_CUDA_CHECK(cudaMemsetAsync(s.dqn, 0, tq * 4, stream));
  GL_CUDA_CHECK(cudaMemsetAsync(s.dkn, 0, tk * 4, stream));
  GL_CUDA_CHECK(cudaMemsetAsync(s.dv_lin, 0, tk * 4, stream));
  GL_CUDA_CHECK(cudaMemsetAsync(s.dg, 0, th * 4, stream));
  GL_CUDA_CHECK(cudaMemsetAsync(s.dbeta, 0, th * 4, stream));
  if (T > shift) {
    const int N = T - shift;
    GL_TRY(kc::gated_delta_backward(
        s.dqn + (size_t)shift * H * D, s.dkn + (size_t)sinks * G * D,
        s.dv_lin + (size_t)sinks * G * D, s.dg + (size_t)sinks * H, s.dbeta + (size_t)sinks * H,
        s.dy_lin + (size_t)shift * H * D, s.qn + (size_t)shift * H * D,
        s.kn + (size_t)sinks * G * D, s.vc + (size_t)sinks * G * D, s.g + (size_t)sinks * H,
        s.beta + (size_t)sinks * H, N, H, G, D, s.gdn_backward_ws, s.gdn_backward_bytes, stream));
  }
  GL_TRY(kc::hybrid_gates_backward(s.dlogits, grad_of("A_log"), grad_of("dt_bias"),
                                   grad_of("b_beta"), grad_of("b_lambda"), s.dg, s.dbeta, s.logits,
                                   s.g, s.beta, param("A_log"), param("dt_bias"), T, H, stream));
  // d[w_a; w_b; w_λ] += dlogitsᵀ x (fp32 GEMM; the three are contiguous in the block).
  GL_TRY(kc::convert_bf16_to_f32(s.x_f32, x, (long)T * C, stream));
  GL_TRY(kc::gemm_f32_tn_accumulate(cublas, grad_, s.dlogits, s.x_f32, T, 3 * H, C, stream));
  GL_TRY(kc::unit_rows_backward(s.dqc, s.dqn, s.qc, (long)T * H, D, stream));
  GL_TRY(kc::unit_rows_backward(s.dkc, s.dkn, s.kc, (long)T * G, D, stream));
  // 2 exact branch, then RoPE's transpose into the conv-output gradients.
  GL_TRY(kc::attention_backward(s.dqr, s.dkr, s.dv, s.dy_exact, s.y_exact, s.lse, s.qr, s.kr,
                                s.vc, T, H, G, D, kc::AttentionMaskSpec{sinks, window},
                                s.attn_backward_ws, s.attn_backward_bytes, stream));
  GL_TRY(kc::rope_backward_add_f32(s.dqc, s.dqr, inv_freq_.get(), T, H, D, 0, stream));
  GL_TRY(kc::rope_backward_add_f32(s.dkc, s.dkr, inv_freq_.get(), T, G, D, 0, stream));
  GL_TRY(kc::add_f32(s.dv, s.dv_lin, (long)tk, stream));
  // 1 short conv: tap gradients (+=); the input gradients into dq/dk/dv when asked for, else
  //   into a scratch buffer (attention transfer: frozen backbone, nothing flows back).
  GL_TRY(kc::short_conv_backward(dq ? dq : s.conv_dx, grad_of("conv_q"), s.dqc, q,
                                 param("conv_q"), T, H * D, stream));
  GL_TRY(kc::short_conv_backward(dk ? dk : s.conv_dx, grad_of("conv_k"), s.dkc, k,
                                 param("conv_k"), T, G * D, stream));
  GL_TRY(kc::short_conv_backward(dv ? dv : s.conv_dx, grad_of("conv_v"), s.dv, v,
                                 param("conv_v"), T, G * D, stream));
  // x enters only through the gate logits: dx = dlogits (T, 3H) · [w_a; w_b; w_λ] (3H, C), the
  //   fp32 parameters (the first 3H·C floats of the block).
  if (dx) GL_TRY(kc::gemm_f32_nn(cublas, dx, 0.0f, s.dlogits, value_, T, C, 3 * H, stream));
  return ok_status();
}

}  // namespace golinear::mixers::cuda
