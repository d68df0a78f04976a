// The GPU hybrid layer's training forward and backward (gpu_hybrid_layer.h), composed from the
// kernels of kernels/cuda. Stages, as in mixers/hybrid_mixer.cpp:
//   1 short conv      q, k, v → q̃, k̃, ṽ                          short_conv_forward / _backward
//   2 exact branch    RoPE, softmax over sinks ∪ window (+ lse)    attention_forward / _backward
//   3 linear branch   q̂, k̂ (unit rows), g, β from the gate GEMM,   gated_delta_chunked_forward /
//                     GDN with the delayed read (pointer shift)    gated_delta_backward
//   4 mix gate        y = (1 − λ) y_exact + λ y_lin                mix_gate_forward_f32 / _backward
#include "mixers/cuda/gpu_hybrid_layer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gated_delta.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/hybrid.h"
#include "kernels/cuda/hybrid_train.h"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/short_conv.h"

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

// ---- stage profile -----------------------------------------------------------------------------

GpuStageProfile::~GpuStageProfile() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);  // nothing to report from a destructor
}

bool GpuStageProfile::enabled_by_env() {
  const char* env = std::getenv("GOLINEAR_TRANSFER_PROFILE");
  return env && *env && std::strcmp(env, "0") != 0;
}

void GpuStageProfile::mark(const char* stage, cudaStream_t stream) {
  if (!enabled_) return;
  if (used_ == events_.size()) {
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess) return;  // timing only: a missing mark merges stages
    events_.push_back(e);
    pending_.push_back(nullptr);
  }
  if (cudaEventRecord(events_[used_], stream) != cudaSuccess) return;
  pending_[used_++] = stage;
}

Status GpuStageProfile::collect() {
  if (!enabled_ || used_ == 0) return ok_status();
  GL_CUDA_CHECK(cudaEventSynchronize(events_[used_ - 1]));
  for (size_t i = 1; i < used_; ++i) {
    float ms = 0;
    GL_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i - 1], events_[i]));
    size_t row = 0;
    while (row < totals_.size() && totals_[row].first != pending_[i]) ++row;
    if (row == totals_.size()) totals_.push_back({pending_[i], 0.0}), counts_.push_back(0);
    totals_[row].second += ms;
    counts_[row] += 1;
  }
  // The last event starts the next interval (the gap until the next mark is charged to it).
  std::swap(events_[0], events_[used_ - 1]);
  pending_[0] = pending_[used_ - 1];
  used_ = 1;
  return ok_status();
}

std::string GpuStageProfile::report(const std::string& title, long units,
                                    const std::string& unit) const {
  double total = 0;
  for (const auto& [name, ms] : totals_) total += ms;
  std::string out = title + "\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-44s %10s %12s %7s %8s\n", "stage", "total ms",
                ("ms/" + unit).c_str(), "share", "marks");
  out += line;
  for (size_t i = 0; i < totals_.size(); ++i) {
    std::snprintf(line, sizeof line, "  %-44s %10.1f %12.3f %6.1f%% %8ld\n", totals_[i].first.c_str(),
                  totals_[i].second, totals_[i].second / std::max(1L, units),
                  total > 0 ? 100.0 * totals_[i].second / total : 0.0, counts_[i]);
    out += line;
  }
  std::snprintf(line, sizeof line, "  %-44s %10.1f %12.3f\n", "total (GPU time between marks)", total,
                total / std::max(1L, units));
  out += line;
  return out;
}

// ---- scratch -----------------------------------------------------------------------------------

Status GpuHybridScratch::allocate(const AttentionShape& sh, const MixerOptions& o, int T) {
  const size_t tq = (size_t)T * sh.H * sh.D, tk = (size_t)T * sh.G * sh.D, th = (size_t)T * sh.H;
  const int N = std::max(1, T - o.sinks - o.window);
  gdn_forward_bytes = kc::gated_delta_forward_workspace_bytes(N, sh.H, sh.D, false);
  gdn_backward_bytes = kc::gated_delta_backward_workspace_bytes(N, sh.H, sh.D);
  attn_backward_bytes = kc::attention_backward_workspace_bytes(T, sh.H, sh.G, sh.D);
  nmse_bytes = kc::nmse_workspace_bytes();
  conv_bytes = kc::short_conv_backward_workspace_bytes(T, std::max(sh.H, sh.G) * sh.D);
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
    dlogits_hi = (bf16*)take(3 * th * 2), dlogits_lo = (bf16*)take(3 * th * 2);
    rope_cs = (float2*)take((size_t)T * (sh.D / 2) * sizeof(float2));
    gdn_forward_ws = take(gdn_forward_bytes);
    gdn_backward_ws = take(gdn_backward_bytes);
    attn_backward_ws = take(attn_backward_bytes);
    nmse_ws = take(nmse_bytes);
    conv_ws = take(conv_bytes);
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
                               const bf16* v, cublasHandle_t cublas, cudaStream_t stream,
                               bool mix_output) const {
  const int T = s.T(), C = shape_.C, H = shape_.H, G = shape_.G, D = shape_.D;
  const int sinks = options_.sinks, window = options_.window, shift = sinks + window;
  auto mark = [&](const char* stage) {
    if (s.profile) s.profile->mark(stage, stream);
  };
  // 1 short conv, fused with RoPE (exact branch) and the unit rows (linear branch):
  //   qc → qr, qn; kc → kr, kn; vc.
  GL_TRY(kc::rope_table(s.rope_cs, inv_freq_.get(), T, D, 0, stream));
  GL_TRY(kc::conv_rope_unit_forward(s.qc, s.qr, s.qn, q, param("conv_q"), s.rope_cs, T, H, D, stream));
  GL_TRY(kc::conv_rope_unit_forward(s.kc, s.kr, s.kn, k, param("conv_k"), s.rope_cs, T, G, D, stream));
  GL_TRY(kc::conv_rope_unit_forward(s.vc, nullptr, nullptr, v, param("conv_v"), nullptr, T, G, D, stream));
  mark("fwd conv+rope+unit rows");
  // 2 exact branch
  GL_TRY(kc::attention_forward(s.y_exact, s.lse, s.qr, s.kr, s.vc, T, H, G, D,
                               kc::AttentionMaskSpec{sinks, window}, stream));
  mark("fwd attention (sink+window)");
  // 3 linear branch: gates, GDN with the delayed read (keys from row s, queries from row s + w;
  //   queries before s + w read the zero state).
  GL_TRY(kc::gemm_bf16_nt(cublas, s.logits, false, x, w_gates_.get(), T, 3 * H, C, stream));
  mark("fwd gate GEMM");
  GL_TRY(kc::hybrid_gates_forward(s.g, s.beta, s.lambda, s.logits, param("A_log"),
                                  param("dt_bias"), param("b_beta"), param("b_lambda"), T, H,
                                  stream));
  mark("fwd gates");
  // Only the rows before the shift are not written by the GDN.
  GL_CUDA_CHECK(cudaMemsetAsync(s.y_lin, 0, (size_t)std::min(T, shift) * H * D * 2, stream));
  if (T > shift) {
    const int N = T - shift;
    GL_TRY(kc::gated_delta_chunked_forward(
        s.y_lin + (size_t)shift * H * D, nullptr, nullptr, s.qn + (size_t)shift * H * D,
        s.kn + (size_t)sinks * G * D, s.vc + (size_t)sinks * G * D, s.g + (size_t)sinks * H,
        s.beta + (size_t)sinks * H, N, H, G, D, s.gdn_forward_ws, s.gdn_forward_bytes, stream));
  }
  mark("fwd GDN (gated_delta_chunked_forward)");
  // 4 mix gate
  if (mix_output) {
    GL_TRY(kc::mix_gate_forward_f32(s.y, s.y_exact, s.y_lin, s.lambda, T, H, D, stream));
    mark("fwd mix");
  }
  return ok_status();
}

Status GpuHybridLayer::loss_nmse(GpuHybridScratch& s, double* sums, const bf16* teacher,
                                 cudaStream_t stream) const {
  GL_TRY(kc::mix_gate_nmse_forward(sums, s.y_exact, s.y_lin, s.lambda, teacher, s.T(), shape_.H,
                                   shape_.D, s.nmse_ws, s.nmse_bytes, stream));
  if (s.profile) s.profile->mark("fwd mix + loss (fused NMSE sums)", stream);
  return ok_status();
}

Status GpuHybridLayer::backward_nmse(GpuHybridScratch& s, const double* sums, float scale,
                                     const bf16* teacher, const bf16* x, const bf16* q,
                                     const bf16* k, const bf16* v, cublasHandle_t cublas,
                                     cudaStream_t stream) {
  GL_TRY(kc::mix_gate_nmse_backward(s.dy_exact, s.dy_lin, s.dlogits, sums, scale, teacher,
                                    s.y_exact, s.y_lin, s.lambda, s.T(), shape_.H, shape_.D,
                                    stream));
  if (s.profile) s.profile->mark("bwd loss gradient + mix (fused)", stream);
  return backward_below_mix(s, x, q, k, v, cublas, stream, nullptr, nullptr, nullptr, nullptr);
}

Status GpuHybridLayer::backward(GpuHybridScratch& s, const bf16* x, const bf16* q, const bf16* k,
                                const bf16* v, cublasHandle_t cublas, cudaStream_t stream) {
  return backward(s, x, q, k, v, cublas, stream, nullptr, nullptr, nullptr, nullptr);
}

Status GpuHybridLayer::backward(GpuHybridScratch& s, const bf16* x, const bf16* q, const bf16* k,
                                const bf16* v, cublasHandle_t cublas, cudaStream_t stream,
                                float* dx, float* dq, float* dk, float* dv) {
  // 4 mix gate: dy → dy_exact, dy_lin and the λ-logit gradients.
  GL_TRY(kc::mix_gate_backward(s.dy_exact, s.dy_lin, s.dlogits, s.dy, s.y_exact, s.y_lin,
                               s.lambda, s.T(), shape_.H, shape_.D, stream));
  if (s.profile) s.profile->mark("bwd mix", stream);
  return backward_below_mix(s, x, q, k, v, cublas, stream, dx, dq, dk, dv);
}

Status GpuHybridLayer::backward_below_mix(GpuHybridScratch& s, const bf16* x, const bf16* q,
                                          const bf16* k, const bf16* v, cublasHandle_t cublas,
                                          cudaStream_t stream, float* dx, float* dq, float* dk,
                                          float* dv) {
  const int T = s.T(), C = shape_.C, H = shape_.H, G = shape_.G, D = shape_.D;
  const int sinks = options_.sinks, window = options_.window, shift = sinks + window;
  const size_t tk = (size_t)T * G * D;
  auto mark = [&](const char* stage) {
    if (s.profile) s.profile->mark(stage, stream);
  };
  // 3 linear branch: the GDN backward writes only the rows its shifted pointers cover (queries
  //   [shift, T), keys and gates [sinks, T − window)); the other rows are zeroed.
  const int covered = std::max(0, T - shift);
  auto zero_rows = [&](void* p, size_t row_bytes, int from, int count) -> Status {
    if (count > 0)
      GL_CUDA_CHECK(cudaMemsetAsync((char*)p + (size_t)from * row_bytes, 0, (size_t)count * row_bytes, stream));
    return ok_status();
  };
  auto zero_outside = [&](void* p, size_t row_bytes, int first) -> Status {
    const int begin = std::min(T, first), end = std::min(T, first + covered);
    GL_TRY(zero_rows(p, row_bytes, 0, begin));
    return zero_rows(p, row_bytes, end, T - end);
  };
  GL_TRY(zero_outside(s.dqn, (size_t)H * D * 4, shift));
  GL_TRY(zero_outside(s.dkn, (size_t)G * D * 4, sinks));
  GL_TRY(zero_outside(s.dv_lin, (size_t)G * D * 4, sinks));
  GL_TRY(zero_outside(s.dg, (size_t)H * 4, sinks));
  GL_TRY(zero_outside(s.dbeta, (size_t)H * 4, sinks));
  mark("bwd memsets");
  if (T > shift) {
    const int N = T - shift;
    GL_TRY(kc::gated_delta_backward(
        s.dqn + (size_t)shift * H * D, s.dkn + (size_t)sinks * G * D,
        s.dv_lin + (size_t)sinks * G * D, s.dg + (size_t)sinks * H, s.dbeta + (size_t)sinks * H,
        s.dy_lin + (size_t)shift * H * D, s.qn + (size_t)shift * H * D,
        s.kn + (size_t)sinks * G * D, s.vc + (size_t)sinks * G * D, s.g + (size_t)sinks * H,
        s.beta + (size_t)sinks * H, N, H, G, D, s.gdn_backward_ws, s.gdn_backward_bytes, stream));
  }
  mark("bwd GDN (gated_delta_backward)");
  GL_TRY(kc::hybrid_gates_backward(s.dlogits, grad_of("A_log"), grad_of("dt_bias"),
                                   grad_of("b_beta"), grad_of("b_lambda"), s.dg, s.dbeta, s.logits,
                                   s.g, s.beta, param("A_log"), param("dt_bias"), T, H, stream));
  mark("bwd gates");
  // d[w_a; w_b; w_λ] += dlogitsᵀ x (the three are contiguous in the block): x is bf16, dlogits
  //   fp32 as a bf16 pair hi + lo (about 2^-16 relative), two bf16 tensor-core GEMMs with fp32
  //   accumulation.
  GL_TRY(kc::split_f32_to_bf16_pair(s.dlogits_hi, s.dlogits_lo, s.dlogits, (long)T * 3 * H, stream));
  GL_TRY(kc::gemm_bf16_tn_accumulate(cublas, grad_, s.dlogits_hi, x, T, 3 * H, C, stream));
  GL_TRY(kc::gemm_bf16_tn_accumulate(cublas, grad_, s.dlogits_lo, x, T, 3 * H, C, stream));
  mark("bwd gate-weight GEMM (bf16 pair)");
  GL_TRY(kc::unit_rows_backward(s.dqc, s.dqn, s.qc, (long)T * H, D, stream));
  GL_TRY(kc::unit_rows_backward(s.dkc, s.dkn, s.kc, (long)T * G, D, stream));
  mark("bwd unit rows");
  // 2 exact branch, then RoPE's transpose into the conv-output gradients.
  GL_TRY(kc::attention_backward(s.dqr, s.dkr, s.dv, s.dy_exact, s.y_exact, s.lse, s.qr, s.kr,
                                s.vc, T, H, G, D, kc::AttentionMaskSpec{sinks, window},
                                s.attn_backward_ws, s.attn_backward_bytes, stream));
  mark("bwd attention (sink+window)");
  GL_TRY(kc::rope_backward_add_f32(s.dqc, s.dqr, inv_freq_.get(), T, H, D, 0, stream));
  GL_TRY(kc::rope_backward_add_f32(s.dkc, s.dkr, inv_freq_.get(), T, G, D, 0, stream));
  GL_TRY(kc::add_f32(s.dv, s.dv_lin, (long)tk, stream));
  mark("bwd rope + add");
  // 1 short conv: tap gradients (+=); the input gradients into dq/dk/dv when asked for (null:
  //   not computed; attention transfer: frozen backbone, nothing flows back).
  GL_TRY(kc::short_conv_backward(dq, grad_of("conv_q"), s.dqc, q, param("conv_q"), T, H * D,
                                 s.conv_ws, s.conv_bytes, stream));
  GL_TRY(kc::short_conv_backward(dk, grad_of("conv_k"), s.dkc, k, param("conv_k"), T, G * D,
                                 s.conv_ws, s.conv_bytes, stream));
  GL_TRY(kc::short_conv_backward(dv, grad_of("conv_v"), s.dv, v, param("conv_v"), T, G * D,
                                 s.conv_ws, s.conv_bytes, stream));
  mark("bwd conv");
  // x enters only through the gate logits: dx = dlogits (T, 3H) · [w_a; w_b; w_λ] (3H, C), the
  //   fp32 parameters (the first 3H·C floats of the block).
  if (dx) {
    GL_TRY(kc::gemm_f32_nn(cublas, dx, 0.0f, s.dlogits, value_, T, C, 3 * H, stream));
    mark("bwd input-gradient GEMM");
  }
  return ok_status();
}

}  // namespace golinear::mixers::cuda
