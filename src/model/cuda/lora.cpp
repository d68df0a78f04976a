// LoRA on the GPU (lora.h): the same products as model/lora.cpp, with bf16 operands and fp32
// accumulation, the q/k/v deltas in one GEMM through the block-diagonal b_qkv.
#include "model/cuda/lora.h"

#include <algorithm>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemm.h"

namespace golinear::model::cuda {

namespace kc = kernels::cuda;

namespace {

// Rows of target t in the fused [q; k; v] output, and their count.
int qkv_row0(LoraTarget t, int HD, int GD) {
  return t == LoraTarget::q ? 0 : t == LoraTarget::k ? HD : HD + GD;
}

}  // namespace

long GpuLora::parameter_count(const LoraAdapters& host) {
  long n = 0;
  for (const mixers::Parameter* p : host.parameters()) n += (long)p->value.size();
  return n;
}

Result<std::unique_ptr<GpuLora>> GpuLora::create(const ModelConfig& c, const LoraAdapters& host,
                                                 float* value, float* grad) {
  if (!host.enabled()) return make_error("gpu lora: no adapters");
  if ((int)host.layers.size() != c.num_layers)
    return make_error("gpu lora: adapters for ", host.layers.size(), " layers, the model has ", c.num_layers);
  auto g = std::unique_ptr<GpuLora>(new GpuLora());
  g->C_ = c.hidden_size;
  g->HD_ = c.num_heads * c.head_dim;
  g->GD_ = c.num_kv_heads * c.head_dim;
  g->r_ = host.options.rank;
  g->s_ = host.options.scale();
  const int C = g->C_, HD = g->HD_, GD = g->GD_, r = g->r_, QKV = HD + 2 * GD;
  g->layers_.resize(c.num_layers);
  long offset = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    const LoraLayer& h = host.layers[l];
    GpuLoraLayer& L = g->layers_[l];
    L.adapted = h.adapted;
    if (!h.adapted) continue;
    for (int t = 0; t < kLoraTargets; ++t) {
      if (!h.has((LoraTarget)t)) continue;
      const mixers::Parameter& A = h.A[t];
      const mixers::Parameter& B = h.B[t];
      if (A.shape[0] != r || B.shape[1] != r) return make_error("gpu lora: layer ", l, " ", A.name, " is not of rank ", r);
      L.offset_a[t] = offset;
      offset += (long)A.value.size();
      L.offset_b[t] = offset;
      offset += (long)B.value.size();
      (t == (int)LoraTarget::o ? L.has_o : L.has_qkv) = true;
    }
    kc::DeviceArena& a = g->operands_;
    if (L.has_qkv) {
      GL_ASSIGN_OR_RETURN(L.a_qkv, a.alloc<bf16>((size_t)3 * r * C));
      GL_ASSIGN_OR_RETURN(L.b_qkv, a.alloc<bf16>((size_t)QKV * 3 * r));
      GL_CUDA_CHECK(cudaMemset(L.a_qkv, 0, (size_t)3 * r * C * sizeof(bf16)));
      GL_CUDA_CHECK(cudaMemset(L.b_qkv, 0, (size_t)QKV * 3 * r * sizeof(bf16)));
    }
    if (L.has_o) {
      GL_ASSIGN_OR_RETURN(L.a_o, a.alloc<bf16>((size_t)r * HD));
      GL_ASSIGN_OR_RETURN(L.b_o, a.alloc<bf16>((size_t)C * r));
    }
  }
  g->P_ = offset;
  if (value) {
    g->value_ = value;
  } else {
    GL_TRY(g->own_value_.allocate(offset));
    g->value_ = g->own_value_.get();
  }
  g->grad_ = grad;
  // The zeroed operands (cudaMemset, legacy stream) before any use on a non-blocking stream.
  GL_CUDA_CHECK(cudaDeviceSynchronize());
  return g;
}

size_t GpuLora::bytes() const { return operands_.bytes() + own_value_.bytes(); }

Status GpuLora::upload(const LoraAdapters& host, cudaStream_t s) {
  std::vector<float> flat;
  flat.reserve(P_);
  for (const mixers::Parameter* p : host.parameters()) flat.insert(flat.end(), p->value.begin(), p->value.end());
  if ((long)flat.size() != P_) return make_error("gpu lora: ", flat.size(), " host values for ", P_, " on the device");
  GL_CUDA_CHECK(cudaMemcpyAsync(value_, flat.data(), P_ * sizeof(float), cudaMemcpyHostToDevice, s));
  GL_TRY(refresh(s));
  GL_CUDA_CHECK(cudaStreamSynchronize(s));  // `flat` is a temporary
  return ok_status();
}

namespace {

Status download_into(const float* device, LoraAdapters& host, long P, bool grads, cudaStream_t s) {
  std::vector<float> flat(P);
  GL_CUDA_CHECK(cudaMemcpyAsync(flat.data(), device, P * sizeof(float), cudaMemcpyDeviceToHost, s));
  GL_CUDA_CHECK(cudaStreamSynchronize(s));
  long at = 0;
  for (mixers::Parameter* p : host.parameters()) {
    std::vector<float>& dst = grads ? p->grad : p->value;
    if (at + (long)dst.size() > P) return make_error("gpu lora: the host adapters do not match the device's");
    std::copy(flat.begin() + at, flat.begin() + at + (long)dst.size(), dst.begin());
    at += (long)dst.size();
  }
  if (at != P) return make_error("gpu lora: the host adapters do not match the device's");
  return ok_status();
}

}  // namespace

Status GpuLora::download(LoraAdapters& host, cudaStream_t s) const {
  return download_into(value_, host, P_, false, s);
}

Status GpuLora::download_grads(LoraAdapters& host, cudaStream_t s) const {
  if (!grad_) return make_error("gpu lora: the adapters have no gradients (inference)");
  return download_into(grad_, host, P_, true, s);
}

Status GpuLora::refresh(cudaStream_t s) {
  const int C = C_, HD = HD_, GD = GD_, r = r_;
  for (const GpuLoraLayer& L : layers_) {
    if (!L.adapted) continue;
    for (int t = 0; t < kLoraTargets; ++t) {
      if (L.offset_a[t] < 0) continue;
      const LoraTarget target = (LoraTarget)t;
      if (target == LoraTarget::o) {
        GL_TRY(kc::scaled_block_to_bf16(L.a_o, HD, value_ + L.offset_a[t], r, HD, 1.0f, s));
        GL_TRY(kc::scaled_block_to_bf16(L.b_o, r, value_ + L.offset_b[t], C, r, s_, s));
        continue;
      }
      const int out = target == LoraTarget::q ? HD : GD;
      GL_TRY(kc::scaled_block_to_bf16(L.a_qkv + (size_t)t * r * C, C, value_ + L.offset_a[t], r, C, 1.0f, s));
      GL_TRY(kc::scaled_block_to_bf16(L.b_qkv + (size_t)qkv_row0(target, HD, GD) * 3 * r + t * r, 3 * r,
                                      value_ + L.offset_b[t], out, r, s_, s));
    }
  }
  return ok_status();
}

Status GpuLora::forward_qkv(int l, float* qkv32, const bf16* xn, bf16* u, int n, cublasHandle_t cb,
                            cudaStream_t s) const {
  const GpuLoraLayer& L = layers_[l];
  if (!L.has_qkv) return ok_status();
  const int r3 = 3 * r_, QKV = HD_ + 2 * GD_;
  GL_TRY(kc::gemm_nt(cb, u, true, xn, L.a_qkv, n, r3, C_, 0.0f, s));        // u = xn A_qkvᵀ
  return kc::gemm_nt(cb, qkv32, false, u, L.b_qkv, n, QKV, r3, 1.0f, s);    // += u (s·B)ᵀ
}

Status GpuLora::forward_o(int l, float* h, const bf16* y, bf16* u, int n, cublasHandle_t cb,
                          cudaStream_t s) const {
  const GpuLoraLayer& L = layers_[l];
  if (!L.has_o) return ok_status();
  GL_TRY(kc::gemm_nt(cb, u, true, y, L.a_o, n, r_, HD_, 0.0f, s));
  return kc::gemm_nt(cb, h, false, u, L.b_o, n, C_, r_, 1.0f, s);
}

Status GpuLora::backward_qkv(int l, float* dxn, const bf16* dqkv, const bf16* xn,
                             const GpuLoraScratch& w, cublasHandle_t cb, cudaStream_t s) {
  const GpuLoraLayer& L = layers_[l];
  if (!L.has_qkv) return ok_status();
  const int T = w.T, C = C_, HD = HD_, GD = GD_, r = r_, r3 = 3 * r, QKV = HD + 2 * GD;
  GL_TRY(kc::gemm_nt(cb, w.u, true, xn, L.a_qkv, T, r3, C, 0.0f, s));  // recompute u (T, 3r)
  if (grad_) {  // d(s·B) = dqkvᵀ u, only the diagonal blocks are parameters
    GL_CUDA_CHECK(cudaMemsetAsync(w.dB, 0, (size_t)QKV * r3 * 4, s));
    GL_TRY(kc::gemm_bf16_tn_accumulate(cb, w.dB, dqkv, w.u, T, QKV, r3, s));
    for (int t = 0; t < 3; ++t)
      if (L.offset_b[t] >= 0)
        GL_TRY(kc::add_scaled_block_f32(grad_ + L.offset_b[t],
                                        w.dB + (size_t)qkv_row0((LoraTarget)t, HD, GD) * r3 + t * r, r3,
                                        t == 0 ? HD : GD, r, s_, s));
  }
  GL_TRY(kc::gemm_bf16_nn(cb, w.du, 0.0f, dqkv, L.b_qkv, T, r3, QKV, s));  // du = dqkv (s·B)
  GL_TRY(kc::convert_f32_to_bf16(w.du_bf, w.du, (long)T * r3, s));
  if (grad_) {  // dA = duᵀ xn
    GL_CUDA_CHECK(cudaMemsetAsync(w.dA, 0, (size_t)r3 * C * 4, s));
    GL_TRY(kc::gemm_bf16_tn_accumulate(cb, w.dA, w.du_bf, xn, T, r3, C, s));
    for (int t = 0; t < 3; ++t)
      if (L.offset_a[t] >= 0)
        GL_TRY(kc::add_scaled_block_f32(grad_ + L.offset_a[t], w.dA + (size_t)t * r * C, C, r, C, 1.0f, s));
  }
  return kc::gemm_bf16_nn(cb, dxn, 1.0f, w.du_bf, L.a_qkv, T, C, r3, s);  // dxn += du A
}

Status GpuLora::backward_o(int l, float* dy, const bf16* dh, const bf16* y, const GpuLoraScratch& w,
                           cublasHandle_t cb, cudaStream_t s) {
  const GpuLoraLayer& L = layers_[l];
  if (!L.has_o) return ok_status();
  const int T = w.T, C = C_, HD = HD_, r = r_;
  const int o = (int)LoraTarget::o;
  GL_TRY(kc::gemm_nt(cb, w.u, true, y, L.a_o, T, r, HD, 0.0f, s));  // u (T, r)
  if (grad_) {
    GL_CUDA_CHECK(cudaMemsetAsync(w.dB, 0, (size_t)C * r * 4, s));
    GL_TRY(kc::gemm_bf16_tn_accumulate(cb, w.dB, dh, w.u, T, C, r, s));
    GL_TRY(kc::add_scaled_block_f32(grad_ + L.offset_b[o], w.dB, r, C, r, s_, s));
  }
  GL_TRY(kc::gemm_bf16_nn(cb, w.du, 0.0f, dh, L.b_o, T, r, C, s));
  GL_TRY(kc::convert_f32_to_bf16(w.du_bf, w.du, (long)T * r, s));
  if (grad_) GL_TRY(kc::gemm_bf16_tn_accumulate(cb, grad_ + L.offset_a[o], w.du_bf, y, T, r, HD, s));
  return kc::gemm_bf16_nn(cb, dy, 1.0f, w.du_bf, L.a_o, T, HD, r, s);
}

Result<GpuLoraScratch> GpuLora::scratch_allocate(kc::DeviceArena& a, int T) const {
  const size_t t = T, r3 = 3 * (size_t)r_, QKV = HD_ + 2 * (size_t)GD_;
  GpuLoraScratch w;
  w.T = T;
  GL_ASSIGN_OR_RETURN(w.u, a.alloc<bf16>(t * r3));
  GL_ASSIGN_OR_RETURN(w.du, a.alloc<float>(t * r3));
  GL_ASSIGN_OR_RETURN(w.du_bf, a.alloc<bf16>(t * r3));
  GL_ASSIGN_OR_RETURN(w.dA, a.alloc<float>(r3 * std::max(C_, HD_)));
  GL_ASSIGN_OR_RETURN(w.dB, a.alloc<float>(std::max(QKV, (size_t)C_) * r3));
  return w;
}

}  // namespace golinear::model::cuda
