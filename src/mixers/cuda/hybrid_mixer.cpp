// The GPU hybrid mixer (hybrid_mixer.h), composed from the kernels of kernels/cuda. Stages, as
// in mixers/hybrid_mixer.cpp:
//   1 short conv      q, k, v → q̃, k̃, ṽ (fused with RoPE and       conv_rope_unit_forward /
//                     the unit rows)                               short_conv_backward
//   2 exact branch    softmax over sinks ∪ window (+ lse)          attention_forward / _backward
//   3 linear branch   q̂, k̂, g, β from the gate GEMM, GDN with the  gated_delta_chunked_forward /
//                     delayed read (a pointer shift)               gated_delta_backward (training's
//                                                                  forward: …_forward_for_backward)
//   4 mixing          y = a·y_exact + b·y_lin                      hybrid_mix_* (hybrid.h)
// Inference with the gate mix fuses 4 into 2's epilogue (attention_forward_mixed).
#include "mixers/cuda/hybrid_mixer.h"

#include <algorithm>
#include <cstdio>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/gated_delta.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/short_conv.h"
#include "mixers/hybrid_mixer.h"

namespace golinear::mixers::cuda {

namespace kc = kernels::cuda;
using kc::HybridMix;

namespace {

constexpr int kConvWidth = 4;

size_t align_up(size_t x) { return (x + 255) / 256 * 256; }

bool has_exact(const MixerOptions& o) { return o.sinks + o.window > 0; }
bool has_linear(const MixerOptions& o) { return o.kind != MixerKind::none; }
bool is_gate(const MixerOptions& o) {
  return o.mix == MixKind::gate || o.mix == MixKind::gate_lse || o.mix == MixKind::split;
}
// Whether the recipe mixes two branches through λ, and whether λ sees the lse.
bool gated(const MixerOptions& o) { return has_exact(o) && has_linear(o) && is_gate(o); }
bool with_lse(const MixerOptions& o) {
  return gated(o) && (o.mix == MixKind::gate_lse || o.mix == MixKind::split);
}
// Mix split: the gate's logit counts the tokens in the state from position sinks + window on.
int far_start(const MixerOptions& o) {
  return gated(o) && o.mix == MixKind::split ? o.sinks + o.window : -1;
}

HybridMix kernel_mix(const MixerOptions& o) {
  if (!has_linear(o)) return HybridMix::exact;
  if (!has_exact(o)) return HybridMix::linear;
  switch (o.mix) {
    case MixKind::add: return HybridMix::add;
    case MixKind::scale: return HybridMix::scale;
    default: return HybridMix::gate;
  }
}

// The gate matrices' rows in the stacked (R, C) block: w_a, w_b (linear), w_lambda (gated).
int gate_rows(const MixerOptions& o, int H) { return (has_linear(o) ? 2 * H : 0) + (gated(o) ? H : 0); }
int lambda_row(const MixerOptions& o, int H) { return gated(o) ? (has_linear(o) ? 2 * H : 0) : -1; }

}  // namespace

Status hybrid_check_recipe(const MixerOptions& o, const AttentionShape& shape) {
  if (o.kind != MixerKind::gdn && o.kind != MixerKind::none)
    return make_error("mixer ", to_string(o.kind),
                      " runs on the CPU only (the GPU runs gdn and none); use --device cpu");
  if (shape.D != 64 && shape.D != 128)
    return make_error("the GPU hybrid mixer supports head dim 64 or 128, the model has ", shape.D,
                      "; use --device cpu");
  if (shape.G <= 0 || shape.H % shape.G != 0)
    return make_error("the GPU hybrid mixer needs kv heads dividing the query heads (", shape.H,
                      ", ", shape.G, ")");
  if (o.sinks < 0 || o.window < 0 || o.sinks + o.window + 1 > kc::kHybridDecodeMaxKeys)
    return make_error("the GPU hybrid mixer needs 0 ≤ sinks + window < ", kc::kHybridDecodeMaxKeys,
                      " (got ", o.sinks, " + ", o.window, ")");
  if (!has_exact(o) && !has_linear(o))
    return make_error("mixer none needs sinks + window > 0");
  return ok_status();
}

std::vector<GpuParamSlot> hybrid_layout(const MixerOptions& o, const AttentionShape& shape) {
  std::vector<TensorSpec> specs = hybrid_tensor_specs(o, shape);
  std::vector<GpuParamSlot> out;
  long offset = 0;
  auto add = [&](const TensorSpec& t) {
    long count = 1;
    for (int64_t d : t.shape) count *= d;
    out.push_back({t.name, offset, count});
    offset += count;
  };
  for (const char* name : {"w_a", "w_b", "w_lambda"})
    for (const TensorSpec& t : specs)
      if (t.name == name) add(t);
  for (const TensorSpec& t : specs)
    if (t.name != "w_a" && t.name != "w_b" && t.name != "w_lambda") add(t);
  return out;
}

long hybrid_parameter_count(const MixerOptions& o, const AttentionShape& shape) {
  const auto layout = hybrid_layout(o, shape);
  return layout.empty() ? 0 : layout.back().offset + layout.back().count;
}

// ---- stage profile -----------------------------------------------------------------------------

GpuStageProfile::~GpuStageProfile() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);  // nothing to report from a destructor
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

// Every buffer of one call, carved in order from the scratch (null where the recipe or the mode
// does not use it). Forward: what every call needs; keep: what the backward reads; then the
// backward's own.
struct GpuHybridMixer::Buffers {
  float2* cs = nullptr;                              // (T, D/2) RoPE table
  bf16 *qc = nullptr, *kc = nullptr, *vc = nullptr;  // (T, H, D), (T, G, D) ×2 after the conv
  bf16 *qr = nullptr, *kr = nullptr;                 // RoPE'd qc, kc
  bf16 *qn = nullptr, *kn = nullptr;                 // the linear branch's unit rows
  float* logits = nullptr;                           // (T, R) gate logits
  float *g = nullptr, *beta = nullptr, *lambda = nullptr, *lse = nullptr;  // (T, H)
  bf16 *y_exact = nullptr, *y_lin = nullptr;         // (T, H, D)
  void* gdn_forward_ws = nullptr;
  size_t gdn_forward_bytes = 0;
  // backward
  float* dy_exact = nullptr;                         // (T, H, D)
  bf16* dy_lin = nullptr;                            // (T, H, D)
  float *dlogits = nullptr, *dcoef = nullptr, *dlse = nullptr;  // (T, R), (T, H), (T, H)
  float *dqn = nullptr, *dkn = nullptr, *dv_lin = nullptr;       // (T, H, D), (T, G, D) ×2
  float *dg = nullptr, *dbeta = nullptr;             // (T, H)
  float *dqr = nullptr, *dkr = nullptr, *dvc = nullptr;  // (T, H, D), (T, G, D) ×2
  float *dqc = nullptr, *dkc = nullptr;              // (T, H, D), (T, G, D)
  float *dql = nullptr, *dkl = nullptr;              // linear RoPE: the unit rows' input grads
  bf16 *dlogits_hi = nullptr, *dlogits_lo = nullptr;  // (T, R) dlogits as a bf16 pair
  void *gdn_backward_ws = nullptr, *attn_backward_ws = nullptr, *nmse_ws = nullptr,
       *conv_ws = nullptr;
  size_t gdn_backward_bytes = 0, attn_backward_bytes = 0, nmse_bytes = 0, conv_bytes = 0;
  size_t total = 0;
};

namespace {

// One carving for the size (base null) and for the call.
void carve_into(GpuHybridMixer::Buffers& b, char* base, const MixerOptions& o, const AttentionShape& sh, int T,
                bool keep) {
  const size_t tq = (size_t)T * sh.H * sh.D, tk = (size_t)T * sh.G * sh.D, th = (size_t)T * sh.H;
  const int R = gate_rows(o, sh.H);
  const bool exact = has_exact(o), linear = has_linear(o);
  const bool fused = !keep && kernel_mix(o) == HybridMix::gate;
  const int N = std::max(1, T - o.sinks - o.window);
  size_t used = 0;
  auto take = [&](size_t bytes) -> void* {
    void* p = base ? base + used : nullptr;
    used += align_up(std::max<size_t>(bytes, 1));
    return p;
  };
  b.cs = (float2*)take((size_t)T * (sh.D / 2) * sizeof(float2));
  b.vc = (bf16*)take(tk * 2);
  if (keep) b.qc = (bf16*)take(tq * 2), b.kc = (bf16*)take(tk * 2);
  b.qr = (bf16*)take(tq * 2), b.kr = (bf16*)take(tk * 2);  // the exact branch's, and linear RoPE's
  if (linear) b.qn = (bf16*)take(tq * 2), b.kn = (bf16*)take(tk * 2);
  if (R > 0) b.logits = (float*)take(th * R / sh.H * 4);
  if (linear) b.g = (float*)take(th * 4), b.beta = (float*)take(th * 4);
  if (gated(o)) b.lambda = (float*)take(th * 4);
  if (exact && (keep || with_lse(o))) b.lse = (float*)take(th * 4);
  if (keep || (!fused && exact)) b.y_exact = (bf16*)take(tq * 2);
  if (keep || (!fused && linear)) b.y_lin = (bf16*)take(tq * 2);
  if (linear && !keep) {  // a training forward runs in the backward's workspace
    b.gdn_forward_bytes = kc::gated_delta_forward_workspace_bytes(N, sh.H, sh.D, false);
    b.gdn_forward_ws = take(b.gdn_forward_bytes);
  }
  if (keep) {
    b.dy_exact = (float*)take(tq * 4);
    b.dy_lin = (bf16*)take(tq * 2);
    if (R > 0) {
      b.dlogits = (float*)take(th * R / sh.H * 4);
      b.dlogits_hi = (bf16*)take(th * R / sh.H * 2), b.dlogits_lo = (bf16*)take(th * R / sh.H * 2);
    }
    if (kernel_mix(o) == HybridMix::scale) b.dcoef = (float*)take(th * 4);  // γ's row terms
    if (with_lse(o)) b.dlse = (float*)take(th * 4);
    if (linear) {
      b.dqn = (float*)take(tq * 4), b.dkn = (float*)take(tk * 4), b.dv_lin = (float*)take(tk * 4);
      b.dg = (float*)take(th * 4), b.dbeta = (float*)take(th * 4);
      b.gdn_backward_bytes = kc::gated_delta_backward_workspace_bytes(N, sh.H, sh.D);
      b.gdn_backward_ws = take(b.gdn_backward_bytes);
      if (o.linear_rope) b.dql = (float*)take(tq * 4), b.dkl = (float*)take(tk * 4);
    }
    if (exact) {
      b.dqr = (float*)take(tq * 4), b.dkr = (float*)take(tk * 4);
      b.attn_backward_bytes = kc::attention_backward_workspace_bytes(T, sh.H, sh.G, sh.D);
      b.attn_backward_ws = take(b.attn_backward_bytes);
    }
    b.dvc = (float*)take(tk * 4);
    b.dqc = (float*)take(tq * 4), b.dkc = (float*)take(tk * 4);
    b.nmse_bytes = kc::nmse_workspace_bytes();
    b.nmse_ws = take(b.nmse_bytes);
    b.conv_bytes = kc::short_conv_backward_workspace_bytes(T, std::max(sh.H, sh.G) * sh.D);
    b.conv_ws = take(b.conv_bytes);
  }
  b.total = used;
}

}  // namespace

size_t HybridScratch::bytes(const MixerOptions& o, const AttentionShape& shape, int T,
                            bool backward) {
  GpuHybridMixer::Buffers s;
  carve_into(s, nullptr, o, shape, T, backward);
  return s.total;
}

Status HybridScratch::reserve(size_t bytes) {
  if (bytes <= memory_.size()) return ok_status();
  return memory_.allocate(bytes);
}

GpuHybridMixer::Buffers GpuHybridMixer::carve(char* base, int T, bool backward) const {
  Buffers b;
  carve_into(b, base, options_, shape_, T, backward);
  return b;
}

// ---- parameters ----------------------------------------------------------------------------------

Result<GpuHybridMixer> GpuHybridMixer::create(const MixerOptions& options,
                                              const AttentionShape& shape,
                                              const std::vector<float>& inv_freq, float* value,
                                              float* grad) {
  GL_TRY(hybrid_check_recipe(options, shape));
  if ((int)inv_freq.size() != shape.D / 2)
    return make_error("GPU hybrid mixer: inv_freq has ", inv_freq.size(), " values, expected ",
                      shape.D / 2);
  GpuHybridMixer m;
  m.options_ = options;
  m.shape_ = shape;
  m.layout_ = hybrid_layout(options, shape);
  m.value_ = value;
  m.grad_ = grad;
  m.gate_rows_ = gate_rows(options, shape.H);
  if (m.gate_rows_ > 0) GL_TRY(m.w_gates_.allocate((size_t)m.gate_rows_ * shape.C));
  GL_TRY(m.inv_freq_.allocate(inv_freq.size()));
  GL_CUDA_CHECK(cudaMemcpy(m.inv_freq_.get(), inv_freq.data(), inv_freq.size() * 4,
                           cudaMemcpyHostToDevice));
  if (!options.conv) {
    const size_t rows = (size_t)std::max(shape.H, shape.G) * shape.D;
    std::vector<float> taps(rows * kConvWidth, 0.0f);
    for (size_t r = 0; r < rows; ++r) taps[r * kConvWidth + kConvWidth - 1] = 1.0f;
    GL_TRY(m.identity_taps_.allocate(taps.size()));
    GL_CUDA_CHECK(cudaMemcpy(m.identity_taps_.get(), taps.data(), taps.size() * 4,
                             cudaMemcpyHostToDevice));
  }
  kc::HybridShape& ks = m.kshape_;
  ks.C = shape.C, ks.H = shape.H, ks.G = shape.G, ks.D = shape.D;
  ks.sinks = options.sinks, ks.window = options.window;
  ks.mix = kernel_mix(options);
  ks.linear_rope = options.linear_rope;
  ks.count_far = far_start(options) >= 0;
  kc::HybridParams& p = m.kparams_;
  p.conv_q = m.param("conv_q"), p.conv_k = m.param("conv_k"), p.conv_v = m.param("conv_v");
  p.w_gates = m.w_gates_.get();
  p.R = m.gate_rows_;
  p.lambda_row = lambda_row(options, shape.H);
  p.b_beta = m.param("b_beta"), p.A_log = m.param("A_log"), p.dt_bias = m.param("dt_bias");
  p.b_lambda = m.param("b_lambda"), p.c_lse = m.param("c_lse"), p.gamma = m.param("gamma");
  p.a_far = m.param("a_far");
  p.inv_freq = m.inv_freq_.get();
  return m;
}

const float* GpuHybridMixer::param(const char* name) const {
  for (const GpuParamSlot& s : layout_)
    if (s.name == name) return value_ + s.offset;
  return nullptr;
}

float* GpuHybridMixer::grad_of(const char* name) const {
  if (!grad_) return nullptr;
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
      return make_error("GPU hybrid mixer: the CPU mixer (", mixer.kind(), ") has no parameter '",
                        slot.name, "' of ", slot.count, " values");
    out.push_back(found);
  }
  if (params.size() != layout.size())
    return make_error("GPU hybrid mixer: the CPU mixer has ", params.size(),
                      " parameters, the GPU layout ", layout.size());
  return out;
}

}  // namespace

Status GpuHybridMixer::upload(Mixer& mixer, cudaStream_t stream) {
  GL_ASSIGN_OR_RETURN(std::vector<Parameter*> params, matching_parameters(mixer, layout_));
  for (size_t i = 0; i < layout_.size(); ++i)
    GL_CUDA_CHECK(cudaMemcpyAsync(value_ + layout_[i].offset, params[i]->value.data(),
                                  layout_[i].count * 4, cudaMemcpyHostToDevice, stream));
  GL_TRY(refresh_gates(stream));
  GL_CUDA_CHECK(cudaStreamSynchronize(stream));
  return ok_status();
}

Status GpuHybridMixer::download(Mixer& mixer, cudaStream_t stream) const {
  GL_ASSIGN_OR_RETURN(std::vector<Parameter*> params, matching_parameters(mixer, layout_));
  for (size_t i = 0; i < layout_.size(); ++i)
    GL_CUDA_CHECK(cudaMemcpyAsync(params[i]->value.data(), value_ + layout_[i].offset,
                                  layout_[i].count * 4, cudaMemcpyDeviceToHost, stream));
  GL_CUDA_CHECK(cudaStreamSynchronize(stream));
  return ok_status();
}

Status GpuHybridMixer::download_grads(Mixer& mixer, cudaStream_t stream) const {
  if (!grad_) return make_error("GPU hybrid mixer: no gradients (an inference mixer)");
  GL_ASSIGN_OR_RETURN(std::vector<Parameter*> params, matching_parameters(mixer, layout_));
  for (size_t i = 0; i < layout_.size(); ++i)
    GL_CUDA_CHECK(cudaMemcpyAsync(params[i]->grad.data(), grad_ + layout_[i].offset,
                                  layout_[i].count * 4, cudaMemcpyDeviceToHost, stream));
  GL_CUDA_CHECK(cudaStreamSynchronize(stream));
  return ok_status();
}

Status GpuHybridMixer::refresh_gates(cudaStream_t stream) {
  // The gate matrices are the first R·C floats of the block.
  if (gate_rows_ == 0) return ok_status();
  return kc::convert_f32_to_bf16(w_gates_.get(), value_, (long)gate_rows_ * shape_.C, stream);
}

// ---- forward -------------------------------------------------------------------------------------

Status GpuHybridMixer::forward_impl(HybridScratch& s, const HybridIO& in, bf16* y16, float* y32,
                                    float* state_final, bool keep, cublasHandle_t cublas,
                                    cudaStream_t stream) const {
  const int T = in.T, C = shape_.C, H = shape_.H, G = shape_.G, D = shape_.D;
  const int sinks = options_.sinks, window = options_.window, shift = sinks + window;
  const bool exact = has_exact(options_), linear = has_linear(options_);
  const HybridMix mix = kernel_mix(options_);
  // Inference with a gate mix: the mix runs in the attention's epilogue (for gate-lse and split
  // the epilogue also finishes λ from the row's lse).
  const bool fused = !keep && mix == HybridMix::gate;
  if (T <= 0) return make_error("GPU hybrid mixer: no tokens");
  if (s.capacity() < HybridScratch::bytes(options_, shape_, T, keep))
    return make_error("GPU hybrid mixer: scratch too small for ", T, " tokens");
  const Buffers b = carve(s.base(), T, keep);
  auto mark = [&](const char* stage) {
    if (s.profile) s.profile->mark(stage, stream);
  };
  const float* conv_q = options_.conv ? kparams_.conv_q : identity_taps_.get();
  const float* conv_k = options_.conv ? kparams_.conv_k : identity_taps_.get();
  const float* conv_v = options_.conv ? kparams_.conv_v : identity_taps_.get();
  // 1 short conv, fused with RoPE (exact branch) and the unit rows (linear branch; of the RoPE'd
  //   rows with linear RoPE, a second pass).
  GL_TRY(kc::rope_table(b.cs, inv_freq_.get(), T, D, 0, stream));
  const bool unit_fused = linear && !options_.linear_rope;
  GL_TRY(kc::conv_rope_unit_forward(b.qc, b.qr, unit_fused ? b.qn : nullptr, in.q, conv_q, b.cs, T,
                                    H, D, stream));
  GL_TRY(kc::conv_rope_unit_forward(b.kc, b.kr, unit_fused ? b.kn : nullptr, in.k, conv_k, b.cs, T,
                                    G, D, stream));
  GL_TRY(kc::conv_rope_unit_forward(b.vc, nullptr, nullptr, in.v, conv_v, nullptr, T, G, D, stream));
  if (linear && options_.linear_rope) {
    GL_TRY(kc::unit_rows_forward(b.qn, b.qr, (long)T * H, D, stream));
    GL_TRY(kc::unit_rows_forward(b.kn, b.kr, (long)T * G, D, stream));
  }
  mark("fwd conv+rope+unit rows");
  // 2 gate logits → g, β (and λ unless it waits for the lse).
  if (gate_rows_ > 0) {
    GL_TRY(kc::gemm_bf16_nt(cublas, b.logits, false, in.x, w_gates_.get(), T, gate_rows_, C, stream));
    mark("fwd gate GEMM");
    // λ now, unless it needs the lse: then after the attention, or its logit now for the fused mix.
    const bool logit_only = fused && with_lse(options_);
    GL_TRY(kc::hybrid_gates_forward(b.g, b.beta, with_lse(options_) && !fused ? nullptr : b.lambda,
                                    b.logits, gate_rows_, kparams_.lambda_row, kparams_.A_log,
                                    kparams_.dt_bias, kparams_.b_beta, kparams_.b_lambda, nullptr,
                                    nullptr, kparams_.a_far, far_start(options_), T, H, stream,
                                    logit_only));
    mark("fwd gates");
  }
  // 3 linear branch: GDN with the delayed read (keys from row s, queries from row s + w; queries
  //   before s + w read the zero state). Into y itself when the mix is fused.
  if (linear) {
    bf16* y_lin = fused ? y16 : b.y_lin;
    GL_CUDA_CHECK(cudaMemsetAsync(y_lin, 0, (size_t)std::min(T, shift) * H * D * 2, stream));
    if (T > shift) {
      const int N = T - shift;
      bf16* o = y_lin + (size_t)shift * H * D;
      const bf16 *q = b.qn + (size_t)shift * H * D, *k = b.kn + (size_t)sinks * G * D,
                 *v = b.vc + (size_t)sinks * G * D;
      const float *g = b.g + (size_t)sinks * H, *beta = b.beta + (size_t)sinks * H;
      if (keep) {  // the backward's step 1, kept in its workspace (backward() does not redo it)
        GL_TRY(kc::gated_delta_forward_for_backward(o, q, k, v, g, beta, N, H, G, D,
                                                    b.gdn_backward_ws, b.gdn_backward_bytes,
                                                    stream));
      } else {
        GL_TRY(kc::gated_delta_chunked_forward(o, state_final, nullptr, q, k, v, g, beta, N, H, G,
                                               D, b.gdn_forward_ws, b.gdn_forward_bytes, stream));
      }
    }
    mark("fwd GDN (gated_delta_chunked_forward)");
  }
  // 4 exact branch and the mixing.
  const kc::AttentionMaskSpec mask{sinks, window};
  if (fused) {  // y = (1 − λ) y_exact + λ y_lin in the attention epilogue, y_lin read from y
    kc::AttentionMixGate gate;
    if (with_lse(options_))
      gate = {kparams_.c_lse, kparams_.a_far, far_start(options_), b.lse};
    GL_TRY(kc::attention_forward_mixed(y16, b.lambda, shift, b.qr, b.kr, b.vc, T, H, G, D, mask,
                                       stream, gate));
    mark("fwd attention (sink+window) + mix");
    return ok_status();
  }
  if (exact) {
    GL_TRY(kc::attention_forward(b.y_exact, b.lse, b.qr, b.kr, b.vc, T, H, G, D, mask, stream));
    mark("fwd attention (sink+window)");
  }
  if (with_lse(options_)) {
    GL_TRY(kc::hybrid_gates_forward(nullptr, nullptr, b.lambda, b.logits, gate_rows_,
                                    kparams_.lambda_row, nullptr, nullptr, nullptr,
                                    kparams_.b_lambda, kparams_.c_lse, b.lse, kparams_.a_far,
                                    far_start(options_), T, H, stream));
  }
  if (y16 || y32) {
    GL_TRY(kc::hybrid_mix_forward(y32, y16, mix, b.y_exact, b.y_lin, b.lambda, kparams_.gamma, T, H,
                                  D, stream));
    mark("fwd mix");
  }
  return ok_status();
}

Status GpuHybridMixer::forward(HybridScratch& s, const HybridIO& in, bf16* y, float* state_final,
                               cublasHandle_t cublas, cudaStream_t stream) const {
  return forward_impl(s, in, y, nullptr, state_final, false, cublas, stream);
}

Status GpuHybridMixer::forward_train(HybridScratch& s, const HybridIO& in, float* y32,
                                     cublasHandle_t cublas, cudaStream_t stream) const {
  return forward_impl(s, in, nullptr, y32, nullptr, true, cublas, stream);
}

// ---- backward ------------------------------------------------------------------------------------

Status GpuHybridMixer::loss_nmse(HybridScratch& s, const HybridIO& in, double* sums,
                                 const bf16* teacher, cudaStream_t stream) const {
  const Buffers b = carve(s.base(), in.T, true);
  GL_TRY(kc::hybrid_mix_nmse_forward(sums, kernel_mix(options_), b.y_exact, b.y_lin, b.lambda,
                                     kparams_.gamma, teacher, in.T, shape_.H, shape_.D, b.nmse_ws,
                                     b.nmse_bytes, stream));
  if (s.profile) s.profile->mark("fwd mix + loss (fused NMSE sums)", stream);
  return ok_status();
}

namespace {
// Where the mixing coefficient's gradient goes: the λ column of dlogits (gate), a (T, H) buffer
// summed into γ's gradient afterwards (scale), nowhere (add, one branch).
struct CoefGrad {
  float* dst;
  int stride;
};
}  // namespace

Status GpuHybridMixer::backward_nmse(HybridScratch& s, const HybridIO& in, const double* sums,
                                     float scale, const bf16* teacher, cublasHandle_t cublas,
                                     cudaStream_t stream) {
  const Buffers b = carve(s.base(), in.T, true);
  const bool gate = kernel_mix(options_) == HybridMix::gate;
  GL_TRY(kc::hybrid_mix_nmse_backward(
      b.dy_exact, b.dy_lin, gate ? b.dlogits + kparams_.lambda_row : b.dcoef,
      gate ? gate_rows_ : shape_.H, kernel_mix(options_), sums, scale, teacher, b.y_exact, b.y_lin,
      b.lambda, kparams_.gamma, in.T, shape_.H, shape_.D, stream));
  if (s.profile) s.profile->mark("bwd loss gradient + mix (fused)", stream);
  return backward_below_mix(s, in, cublas, stream, nullptr, nullptr, nullptr, nullptr);
}

Status GpuHybridMixer::backward(HybridScratch& s, const HybridIO& in, const float* dy,
                                cublasHandle_t cublas, cudaStream_t stream, float* dx, float* dq,
                                float* dk, float* dv) {
  const Buffers b = carve(s.base(), in.T, true);
  const bool gate = kernel_mix(options_) == HybridMix::gate;
  GL_TRY(kc::hybrid_mix_backward(b.dy_exact, b.dy_lin,
                                 gate ? b.dlogits + kparams_.lambda_row : b.dcoef,
                                 gate ? gate_rows_ : shape_.H, kernel_mix(options_), dy, b.y_exact,
                                 b.y_lin, b.lambda, kparams_.gamma, in.T, shape_.H, shape_.D,
                                 stream));
  if (s.profile) s.profile->mark("bwd mix", stream);
  return backward_below_mix(s, in, cublas, stream, dx, dq, dk, dv);
}

Status GpuHybridMixer::backward_below_mix(HybridScratch& s, const HybridIO& in,
                                          cublasHandle_t cublas, cudaStream_t stream, float* dx,
                                          float* dq, float* dk, float* dv) {
  if (!grad_) return make_error("GPU hybrid mixer: backward of an inference mixer (no gradients)");
  const int T = in.T, C = shape_.C, H = shape_.H, G = shape_.G, D = shape_.D;
  const int sinks = options_.sinks, window = options_.window, shift = sinks + window;
  const bool exact = has_exact(options_), linear = has_linear(options_);
  const size_t tq = (size_t)T * H * D, tk = (size_t)T * G * D;
  const Buffers b = carve(s.base(), T, true);
  auto mark = [&](const char* stage) {
    if (s.profile) s.profile->mark(stage, stream);
  };
  if (kernel_mix(options_) == HybridMix::scale)
    GL_TRY(kc::hybrid_head_sum(grad_of("gamma"), b.dcoef, H, T, H, stream));
  // 3 linear branch: the GDN backward writes only the rows its shifted pointers cover (queries
  //   [shift, T), keys and gates [sinks, T − window)); the other rows are zeroed.
  if (linear) {
    const int covered = std::max(0, T - shift);
    auto zero_rows = [&](void* p, size_t row_bytes, int from, int count) -> Status {
      if (count > 0)
        GL_CUDA_CHECK(cudaMemsetAsync((char*)p + (size_t)from * row_bytes, 0,
                                      (size_t)count * row_bytes, stream));
      return ok_status();
    };
    auto zero_outside = [&](void* p, size_t row_bytes, int first) -> Status {
      const int begin = std::min(T, first), end = std::min(T, first + covered);
      GL_TRY(zero_rows(p, row_bytes, 0, begin));
      return zero_rows(p, row_bytes, end, T - end);
    };
    GL_TRY(zero_outside(b.dqn, (size_t)H * D * 4, shift));
    GL_TRY(zero_outside(b.dkn, (size_t)G * D * 4, sinks));
    GL_TRY(zero_outside(b.dv_lin, (size_t)G * D * 4, sinks));
    GL_TRY(zero_outside(b.dg, (size_t)H * 4, sinks));
    GL_TRY(zero_outside(b.dbeta, (size_t)H * 4, sinks));
    mark("bwd memsets");
    if (T > shift) {
      const int N = T - shift;
      kc::GatedDeltaBackwardOptions kept;  // forward_train ran its step 1 (forward_impl)
      kept.forward_kept = true;
      GL_TRY(kc::gated_delta_backward(
          b.dqn + (size_t)shift * H * D, b.dkn + (size_t)sinks * G * D,
          b.dv_lin + (size_t)sinks * G * D, b.dg + (size_t)sinks * H, b.dbeta + (size_t)sinks * H,
          b.dy_lin + (size_t)shift * H * D, b.qn + (size_t)shift * H * D,
          b.kn + (size_t)sinks * G * D, b.vc + (size_t)sinks * G * D, b.g + (size_t)sinks * H,
          b.beta + (size_t)sinks * H, N, H, G, D, b.gdn_backward_ws, b.gdn_backward_bytes, stream,
          kept));
    }
    mark("bwd GDN (gated_delta_backward)");
  }
  // Gates (before the exact branch: gate-lse hands it the lse's gradient).
  if (gate_rows_ > 0) {
    GL_TRY(kc::hybrid_gates_backward(
        b.dlogits, gate_rows_, kparams_.lambda_row, grad_of("A_log"), grad_of("dt_bias"),
        grad_of("b_beta"), grad_of("b_lambda"), grad_of("c_lse"), b.dlse, grad_of("a_far"),
        linear ? b.dg : nullptr, b.dbeta, b.logits, b.g, b.beta, kparams_.A_log, kparams_.dt_bias,
        kparams_.c_lse, b.lse, far_start(options_), T, H, stream));
    mark("bwd gates");
    // d[gate matrices] += dlogitsᵀ x (contiguous at the block's start): x is bf16, dlogits fp32
    //   as a bf16 pair hi + lo (about 2^-16 relative), two bf16 tensor-core GEMMs.
    GL_TRY(kc::split_f32_to_bf16_pair(b.dlogits_hi, b.dlogits_lo, b.dlogits, (long)T * gate_rows_,
                                      stream));
    GL_TRY(kc::gemm_bf16_tn_accumulate(cublas, grad_, b.dlogits_hi, in.x, T, gate_rows_, C, stream));
    GL_TRY(kc::gemm_bf16_tn_accumulate(cublas, grad_, b.dlogits_lo, in.x, T, gate_rows_, C, stream));
    mark("bwd gate-weight GEMM (bf16 pair)");
  }
  // Unit rows of the linear branch → the conv outputs' gradients (through RoPE's transpose with
  //   linear RoPE); then the exact branch and RoPE's transpose on top.
  if (linear && !options_.linear_rope) {
    GL_TRY(kc::unit_rows_backward(b.dqc, b.dqn, b.qc, (long)T * H, D, stream));
    GL_TRY(kc::unit_rows_backward(b.dkc, b.dkn, b.kc, (long)T * G, D, stream));
  } else {
    GL_CUDA_CHECK(cudaMemsetAsync(b.dqc, 0, tq * 4, stream));
    GL_CUDA_CHECK(cudaMemsetAsync(b.dkc, 0, tk * 4, stream));
  }
  if (linear && options_.linear_rope) {
    GL_TRY(kc::unit_rows_backward(b.dql, b.dqn, b.qr, (long)T * H, D, stream));
    GL_TRY(kc::unit_rows_backward(b.dkl, b.dkn, b.kr, (long)T * G, D, stream));
    GL_TRY(kc::rope_backward_add_f32(b.dqc, b.dql, inv_freq_.get(), T, H, D, 0, stream));
    GL_TRY(kc::rope_backward_add_f32(b.dkc, b.dkl, inv_freq_.get(), T, G, D, 0, stream));
  }
  mark("bwd unit rows");
  if (exact) {
    GL_TRY(kc::attention_backward(b.dqr, b.dkr, b.dvc, b.dy_exact, b.y_exact, b.lse, b.qr, b.kr,
                                  b.vc, T, H, G, D, kc::AttentionMaskSpec{sinks, window},
                                  b.attn_backward_ws, b.attn_backward_bytes, stream, b.dlse));
    mark("bwd attention (sink+window)");
    GL_TRY(kc::rope_backward_add_f32(b.dqc, b.dqr, inv_freq_.get(), T, H, D, 0, stream));
    GL_TRY(kc::rope_backward_add_f32(b.dkc, b.dkr, inv_freq_.get(), T, G, D, 0, stream));
    if (linear) GL_TRY(kc::add_f32(b.dvc, b.dv_lin, (long)tk, stream));
  } else {
    GL_CUDA_CHECK(cudaMemcpyAsync(b.dvc, b.dv_lin, tk * 4, cudaMemcpyDeviceToDevice, stream));
  }
  mark("bwd rope + add");
  // 1 short conv: tap gradients (+=); the input gradients into dq/dk/dv when asked for (null:
  //   not computed; attention transfer: frozen backbone, nothing flows back). No conv: the conv
  //   outputs are the inputs.
  if (options_.conv) {
    GL_TRY(kc::short_conv_backward(dq, grad_of("conv_q"), b.dqc, in.q, kparams_.conv_q, T, H * D,
                                   b.conv_ws, b.conv_bytes, stream));
    GL_TRY(kc::short_conv_backward(dk, grad_of("conv_k"), b.dkc, in.k, kparams_.conv_k, T, G * D,
                                   b.conv_ws, b.conv_bytes, stream));
    GL_TRY(kc::short_conv_backward(dv, grad_of("conv_v"), b.dvc, in.v, kparams_.conv_v, T, G * D,
                                   b.conv_ws, b.conv_bytes, stream));
  } else {
    if (dq) GL_CUDA_CHECK(cudaMemcpyAsync(dq, b.dqc, tq * 4, cudaMemcpyDeviceToDevice, stream));
    if (dk) GL_CUDA_CHECK(cudaMemcpyAsync(dk, b.dkc, tk * 4, cudaMemcpyDeviceToDevice, stream));
    if (dv) GL_CUDA_CHECK(cudaMemcpyAsync(dv, b.dvc, tk * 4, cudaMemcpyDeviceToDevice, stream));
  }
  mark("bwd conv");
  // x enters only through the gate logits: dx = dlogits (T, R) · gates (R, C), the fp32 values.
  if (dx) {
    if (gate_rows_ > 0) {
      GL_TRY(kc::gemm_f32_nn(cublas, dx, 0.0f, b.dlogits, value_, T, C, gate_rows_, stream));
    } else {
      GL_CUDA_CHECK(cudaMemsetAsync(dx, 0, (size_t)T * C * 4, stream));
    }
    mark("bwd input-gradient GEMM");
  }
  return ok_status();
}

// ---- decode cache --------------------------------------------------------------------------------

Result<kc::HybridCacheView> GpuHybridMixer::cache_create(void* memory, cudaStream_t stream) const {
  return kc::hybrid_cache_create(kshape_, memory, stream);
}

Status GpuHybridMixer::prefill(HybridScratch& s, const HybridIO& in, bf16* y,
                               const kc::HybridCacheView& cache, cublasHandle_t cublas,
                               cudaStream_t stream) const {
  GL_TRY(forward_impl(s, in, y, nullptr, cache.state, false, cublas, stream));
  const Buffers b = carve(s.base(), in.T, false);
  return kc::hybrid_cache_fill(cache, kshape_, in.q, in.k, in.v, b.kr, b.vc, b.kn, b.g, b.beta,
                               in.T, stream);
}

Status GpuHybridMixer::decode_step(bf16* y, const kc::HybridCacheView& cache, const bf16* x,
                                   const bf16* q, const bf16* k, const bf16* v,
                                   cudaStream_t stream) const {
  return kc::hybrid_decode_step(y, kshape_, kparams_, cache, x, q, k, v, stream);
}

Status GpuHybridMixer::decode_step(bf16* y, const kc::HybridCacheView* caches, int B,
                                   const bf16* x, const bf16* q, const bf16* k, const bf16* v,
                                   cudaStream_t stream, const kc::HybridDecodeLaunch& how) const {
  return kc::hybrid_decode_step_batch(y, kshape_, kparams_, caches, B, x, q, k, v, stream, how);
}

}  // namespace golinear::mixers::cuda
