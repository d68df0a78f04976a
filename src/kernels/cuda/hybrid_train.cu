// Training kernels of the hybrid mixer (hybrid_train.h).
#include "kernels/cuda/hybrid_train.h"

#include <algorithm>
#include <cmath>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/hybrid.h"

namespace golinear::kernels::cuda {

namespace {

constexpr int kReduceBlocks = 1024;  // partial sums per reduction (fixed: deterministic order)
constexpr int kReduceThreads = 256;

unsigned grid_for(long n, int threads) {
  return (unsigned)std::max(1L, std::min<long>((n + threads - 1) / threads, 1L << 16));
}

__device__ double block_sum_double(double x, double* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  __syncthreads();
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  double total = 0.0;
  if (threadIdx.x == 0)
    for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;  // valid in thread 0
}

// ---- gates ---------------------------------------------------------------------------------

// One block per head h: loops over t in order, writes the a, b logit gradients (when dg is
// given) and sums the per-head parameter gradients.
__global__ void gates_backward_kernel(float* dlogits, int R, int lambda_row, float* dA_log,
                                      float* ddt_bias, float* db_beta, float* db_lambda,
                                      float* dc_lse, float* dlse, const float* dg,
                                      const float* dbeta, const float* logits, const float* g,
                                      const float* beta, const float* A_log, const float* dt_bias,
                                      const float* c_lse, const float* lse, int T, int H) {
  __shared__ double scratch[32];
  const int h = blockIdx.x;
  const float decay = dg ? expf(A_log[h]) : 0.0f;
  double sum_a = 0, sum_u = 0, sum_z = 0, sum_l = 0, sum_c = 0;
  for (int t = threadIdx.x; t < T; t += blockDim.x) {
    const long row = (long)t * H + h;
    float* lrow = dlogits + (long)t * R;
    if (dg) {
      const float u = logits[(long)t * R + h] + dt_bias[h];
      // g = −exp(A_log)·softplus(u): ∂g/∂A_log = g, ∂g/∂u = −exp(A_log)·σ(u).
      const float du = dg[row] * -decay * device::sigmoidf_(u);
      const float b = beta[row];
      const float dz = dbeta[row] * b * (1.0f - b);
      lrow[h] = du;
      lrow[H + h] = dz;
      sum_a += (double)dg[row] * g[row];
      sum_u += du;
      sum_z += dz;
    }
    if (lambda_row >= 0) {
      const float dl = lrow[lambda_row + h];  // ∂/∂(λ-logit); λ-logit = … − c·lse
      sum_l += dl;
      if (c_lse) {
        sum_c -= (double)dl * lse[row];
        dlse[row] = -dl * c_lse[h];
      }
    }
  }
  sum_a = block_sum_double(sum_a, scratch);
  sum_u = block_sum_double(sum_u, scratch);
  sum_z = block_sum_double(sum_z, scratch);
  sum_l = block_sum_double(sum_l, scratch);
  sum_c = block_sum_double(sum_c, scratch);
  if (threadIdx.x == 0) {
    if (dg) {
      dA_log[h] += (float)sum_a;
      ddt_bias[h] += (float)sum_u;
      db_beta[h] += (float)sum_z;
    }
    if (lambda_row >= 0 && db_lambda) db_lambda[h] += (float)sum_l;
    if (c_lse && dc_lse) dc_lse[h] += (float)sum_c;
  }
}

// out (H) += Σ_t src[t·stride + h], one block per head, in order.
__global__ void head_sum_kernel(float* out, const float* src, int stride, int T, int H) {
  __shared__ double scratch[32];
  const int h = blockIdx.x;
  double sum = 0;
  for (int t = threadIdx.x; t < T; t += blockDim.x) sum += src[(long)t * stride + h];
  sum = block_sum_double(sum, scratch);
  if (threadIdx.x == 0) out[h] += (float)sum;
}

// ---- mixing --------------------------------------------------------------------------------

// The coefficients of y = a·y_exact + b·y_lin for row (t, h) (HybridMix in hybrid.h).
struct MixCoef {
  float a, b;
};
__device__ __forceinline__ MixCoef mix_coef(HybridMix mix, const float* lambda,
                                            const float* gamma, long row, int h) {
  switch (mix) {
    case HybridMix::gate: { const float l = lambda[row]; return {1.0f - l, l}; }
    case HybridMix::add: return {1.0f, 1.0f};
    case HybridMix::scale: return {1.0f, gamma[h]};
    case HybridMix::exact: return {1.0f, 0.0f};
    default: return {0.0f, 1.0f};  // linear
  }
}
// a·ye + b·yl reading only the branches that exist.
__device__ __forceinline__ float mix_value(HybridMix mix, MixCoef c, const bf16* y_exact,
                                          const bf16* y_lin, long i, float* ye_out, float* yl_out) {
  const float ye = mix != HybridMix::linear ? __bfloat162float(y_exact[i]) : 0.0f;
  const float yl = mix != HybridMix::exact ? __bfloat162float(y_lin[i]) : 0.0f;
  *ye_out = ye, *yl_out = yl;
  return c.a * ye + c.b * yl;
}

__global__ void mix_forward_kernel(float* y32, bf16* y16, HybridMix mix, const bf16* y_exact,
                                   const bf16* y_lin, const float* lambda, const float* gamma,
                                   long rows, int H, int D) {
  const long total = rows * D;
  for (long idx = blockIdx.x * (long)blockDim.x + threadIdx.x; idx < total;
       idx += (long)gridDim.x * blockDim.x) {
    const long row = idx / D;
    const MixCoef c = mix_coef(mix, lambda, gamma, row, (int)(row % H));
    float ye, yl;
    const float y = mix_value(mix, c, y_exact, y_lin, idx, &ye, &yl);
    if (y32) y32[idx] = y;
    if (y16) y16[idx] = __float2bfloat16(y);
  }
}

// One warp per (t, h) row: dy_exact = a·g, dy_lin = b·g, and the coefficient's gradient. With
// a teacher, g = factor · (y − t) is recomputed in place (the fused NMSE backward), else g = dy.
__global__ void mix_backward_kernel(float* dy_exact, bf16* dy_lin, float* dcoef, int dcoef_stride,
                                    HybridMix mix, const float* dy, const double* sums,
                                    float scale, const bf16* teacher, const bf16* y_exact,
                                    const bf16* y_lin, const float* lambda, const float* gamma,
                                    long rows, int H, int D) {
  const float factor = teacher ? (float)(2.0 / fmax(sums[1], 1e-12)) * scale : 0.0f;
  const int lane = threadIdx.x % 32;
  for (long row = (blockIdx.x * (long)blockDim.x + threadIdx.x) / 32; row < rows;
       row += (long)gridDim.x * blockDim.x / 32) {
    const int h = (int)(row % H);
    const MixCoef c = mix_coef(mix, lambda, gamma, row, h);
    float dc = 0.0f;
    for (int d = lane; d < D; d += 32) {
      const long i = row * D + d;
      float ye, yl;
      const float y = mix_value(mix, c, y_exact, y_lin, i, &ye, &yl);
      const float g = teacher ? factor * (y - __bfloat162float(teacher[i])) : dy[i];
      if (mix == HybridMix::gate) dc += g * (yl - ye);
      else if (mix == HybridMix::scale) dc += g * yl;
      if (dy_exact) dy_exact[i] = c.a * g;
      if (dy_lin) dy_lin[i] = __float2bfloat16(c.b * g);
    }
    dc = device::warp_sum(dc);
    if (lane == 0 && (mix == HybridMix::gate || mix == HybridMix::scale)) {
      const long t = row / H;
      dcoef[t * dcoef_stride + h] = mix == HybridMix::gate ? dc * c.b * (1.0f - c.b) : dc;
    }
  }
}

// ---- loss ----------------------------------------------------------------------------------

__global__ void nmse_partial_kernel(double* partial, const float* s, const bf16* t, long n) {
  __shared__ double scratch[32];
  double err = 0.0, ref = 0.0;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x) {
    const double tv = __bfloat162float(t[i]);
    const double d = (double)s[i] - tv;
    err += d * d;
    ref += tv * tv;
  }
  err = block_sum_double(err, scratch);
  ref = block_sum_double(ref, scratch);
  if (threadIdx.x == 0) partial[2 * blockIdx.x] = err, partial[2 * blockIdx.x + 1] = ref;
}

// One warp: lane l sums the partials l, l + 32, … in order, then a fixed butterfly.
__device__ double warp_sum_double(double x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

__global__ void nmse_final_kernel(double* sums, const double* partial, int blocks) {
  double err = 0.0, ref = 0.0;
  for (int b = threadIdx.x; b < blocks; b += 32) err += partial[2 * b], ref += partial[2 * b + 1];
  err = warp_sum_double(err);
  ref = warp_sum_double(ref);
  if (threadIdx.x == 0) sums[0] = err, sums[1] = ref;
}

// nmse_partial_kernel of y = a·y_exact + b·y_lin, computed as mix_forward_kernel.
__global__ void mix_nmse_partial_kernel(double* partial, HybridMix mix, const bf16* y_exact,
                                        const bf16* y_lin, const float* lambda, const float* gamma,
                                        const bf16* t, long rows, int H, int D) {
  __shared__ double scratch[32];
  double err = 0.0, ref = 0.0;
  const long n = rows * D;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x) {
    const long row = i / D;
    const MixCoef c = mix_coef(mix, lambda, gamma, row, (int)(row % H));
    float ye, yl;
    const float y = mix_value(mix, c, y_exact, y_lin, i, &ye, &yl);
    const double tv = __bfloat162float(t[i]);
    const double d = (double)y - tv;
    err += d * d;
    ref += tv * tv;
  }
  err = block_sum_double(err, scratch);
  ref = block_sum_double(ref, scratch);
  if (threadIdx.x == 0) partial[2 * blockIdx.x] = err, partial[2 * blockIdx.x + 1] = ref;
}

__global__ void split_bf16_pair_kernel(bf16* hi, bf16* lo, const float* x, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x) {
    const bf16 h = __float2bfloat16(x[i]);
    hi[i] = h;
    lo[i] = __float2bfloat16(x[i] - __bfloat162float(h));
  }
}

__global__ void nmse_grad_kernel(float* dy, const float* s, const bf16* t, long n,
                                 const double* sums, float scale) {
  const double ref = fmax(sums[1], 1e-12);
  const float factor = (float)(2.0 / ref) * scale;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x)
    dy[i] = factor * (s[i] - __bfloat162float(t[i]));
}

// ---- conversions ---------------------------------------------------------------------------

__global__ void f32_to_bf16_kernel(bf16* out, const float* in, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x)
    out[i] = __float2bfloat16(in[i]);
}
__global__ void add_f32_kernel(float* a, const float* b, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x)
    a[i] += b[i];
}

// One thread per (token, frequency), every head: dst += R(−θ) src.
__global__ void rope_backward_add_kernel(float* dst, const float* src, const float* inv_freq,
                                         int T, int N, int D, long pos0) {
  const int half = D / 2;
  const long total = (long)T * half;
  for (long idx = blockIdx.x * (long)blockDim.x + threadIdx.x; idx < total;
       idx += (long)gridDim.x * blockDim.x) {
    const int i = (int)(idx % half);
    const int t = (int)(idx / half);
    float s, c;
    sincosf((float)(pos0 + t) * inv_freq[i], &s, &c);  // fp32 angle, as the CPU reference
    s = -s;
    for (int n = 0; n < N; ++n) {
      const long base = ((long)t * N + n) * D;
      const float a = src[base + i], b = src[base + i + half];
      dst[base + i] += a * c - b * s;
      dst[base + i + half] += b * c + a * s;
    }
  }
}

// ---- optimizer -----------------------------------------------------------------------------

__global__ void sum_squares_partial_kernel(double* partial, const float* x, long n) {
  __shared__ double scratch[32];
  double acc = 0.0;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x)
    acc += (double)x[i] * x[i];
  acc = block_sum_double(acc, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void norm_final_kernel(float* norm, const double* partial, int blocks) {
  double acc = 0.0;
  for (int b = threadIdx.x; b < blocks; b += 32) acc += partial[b];
  acc = warp_sum_double(acc);
  if (threadIdx.x == 0) *norm = (float)sqrt(acc);
}

__global__ void adamw_kernel(float* value, float* grad, float* m, float* v, long n,
                             const float* norm_ptr, float lr, float beta1, float beta2, float eps,
                             float weight_decay, float clip_norm, float bias1, float bias2) {
  const float norm = *norm_ptr;
  const float clip = (clip_norm > 0 && norm > clip_norm && isfinite(norm)) ? clip_norm / norm : 1.0f;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x) {
    const float g = grad[i] * clip;
    const float mi = beta1 * m[i] + (1 - beta1) * g;
    const float vi = beta2 * v[i] + (1 - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float update = (mi / bias1) / (sqrtf(vi / bias2) + eps);
    value[i] -= lr * (update + weight_decay * value[i]);
    grad[i] = 0.0f;
  }
}

}  // namespace

Status hybrid_gates_backward(float* dlogits, int R, int lambda_row, float* dA_log,
                             float* ddt_bias, float* db_beta, float* db_lambda, float* dc_lse,
                             float* dlse, const float* dg, const float* dbeta, const float* logits,
                             const float* g, const float* beta, const float* A_log,
                             const float* dt_bias, const float* c_lse, const float* lse, int T,
                             int H, cudaStream_t stream) {
  if (c_lse && (lambda_row < 0 || !lse || !dlse))
    return make_error("hybrid_gates_backward: c_lse needs the λ row, lse and dlse");
  if (T <= 0) return ok_status();
  gates_backward_kernel<<<H, 256, 0, stream>>>(dlogits, R, lambda_row, dA_log, ddt_bias, db_beta,
                                               db_lambda, dc_lse, dlse, dg, dbeta, logits, g,
                                               beta, A_log, dt_bias, c_lse, lse, T, H);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status hybrid_head_sum(float* out, const float* src, int stride, int T, int H,
                       cudaStream_t stream) {
  if (T <= 0) return ok_status();
  head_sum_kernel<<<H, 256, 0, stream>>>(out, src, stride, T, H);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status hybrid_mix_forward(float* y32, bf16* y16, HybridMix mix, const bf16* y_exact,
                          const bf16* y_lin, const float* lambda, const float* gamma, int T, int H,
                          int D, cudaStream_t stream) {
  if (T <= 0) return ok_status();
  mix_forward_kernel<<<grid_for((long)T * H * D, 256), 256, 0, stream>>>(
      y32, y16, mix, y_exact, y_lin, lambda, gamma, (long)T * H, H, D);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status hybrid_mix_backward(float* dy_exact, bf16* dy_lin, float* dcoef, int dcoef_stride,
                           HybridMix mix, const float* dy, const bf16* y_exact, const bf16* y_lin,
                           const float* lambda, const float* gamma, int T, int H, int D,
                           cudaStream_t stream) {
  if (T <= 0) return ok_status();
  mix_backward_kernel<<<grid_for((long)T * H * 32, 256), 256, 0, stream>>>(
      dy_exact, dy_lin, dcoef, dcoef_stride, mix, dy, nullptr, 0.0f, nullptr, y_exact, y_lin,
      lambda, gamma, (long)T * H, H, D);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status hybrid_mix_nmse_forward(double* sums, HybridMix mix, const bf16* y_exact,
                               const bf16* y_lin, const float* lambda, const float* gamma,
                               const bf16* teacher, int T, int H, int D, void* workspace,
                               size_t workspace_bytes, cudaStream_t stream) {
  if (workspace_bytes < nmse_workspace_bytes())
    return make_error("hybrid_mix_nmse_forward: workspace too small");
  double* partial = static_cast<double*>(workspace);
  mix_nmse_partial_kernel<<<kReduceBlocks, kReduceThreads, 0, stream>>>(
      partial, mix, y_exact, y_lin, lambda, gamma, teacher, (long)T * H, H, D);
  GL_CUDA_CHECK_LAUNCH();
  nmse_final_kernel<<<1, 32, 0, stream>>>(sums, partial, kReduceBlocks);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status hybrid_mix_nmse_backward(float* dy_exact, bf16* dy_lin, float* dcoef, int dcoef_stride,
                                HybridMix mix, const double* sums, float scale,
                                const bf16* teacher, const bf16* y_exact, const bf16* y_lin,
                                const float* lambda, const float* gamma, int T, int H, int D,
                                cudaStream_t stream) {
  if (T <= 0) return ok_status();
  mix_backward_kernel<<<grid_for((long)T * H * 32, 256), 256, 0, stream>>>(
      dy_exact, dy_lin, dcoef, dcoef_stride, mix, nullptr, sums, scale, teacher, y_exact, y_lin,
      lambda, gamma, (long)T * H, H, D);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status split_f32_to_bf16_pair(bf16* hi, bf16* lo, const float* x, long n, cudaStream_t stream) {
  split_bf16_pair_kernel<<<grid_for(n, 256), 256, 0, stream>>>(hi, lo, x, n);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

size_t nmse_workspace_bytes() { return 2 * kReduceBlocks * sizeof(double); }

Status nmse_loss_forward_backward(double* sums, float* dy, const float* student,
                                  const bf16* teacher, long n, float scale, void* workspace,
                                  size_t workspace_bytes, cudaStream_t stream) {
  if (workspace_bytes < nmse_workspace_bytes()) return make_error("nmse_loss: workspace too small");
  double* partial = static_cast<double*>(workspace);
  nmse_partial_kernel<<<kReduceBlocks, kReduceThreads, 0, stream>>>(partial, student, teacher, n);
  GL_CUDA_CHECK_LAUNCH();
  nmse_final_kernel<<<1, 32, 0, stream>>>(sums, partial, kReduceBlocks);
  GL_CUDA_CHECK_LAUNCH();
  if (dy) {
    nmse_grad_kernel<<<grid_for(n, 256), 256, 0, stream>>>(dy, student, teacher, n, sums, scale);
    GL_CUDA_CHECK_LAUNCH();
  }
  return ok_status();
}

Status convert_f32_to_bf16(bf16* out, const float* in, long n, cudaStream_t stream) {
  f32_to_bf16_kernel<<<grid_for(n, 256), 256, 0, stream>>>(out, in, n);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status add_f32(float* a, const float* b, long n, cudaStream_t stream) {
  add_f32_kernel<<<grid_for(n, 256), 256, 0, stream>>>(a, b, n);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status rope_backward_add_f32(float* dst, const float* src, const float* inv_freq, int T, int N,
                             int D, long pos0, cudaStream_t stream) {
  rope_backward_add_kernel<<<grid_for((long)T * D / 2, 256), 256, 0, stream>>>(dst, src, inv_freq,
                                                                               T, N, D, pos0);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

size_t grad_norm_workspace_bytes() { return kReduceBlocks * sizeof(double); }

Status grad_norm(float* norm_out, const float* grad, long n, void* workspace,
                 size_t workspace_bytes, cudaStream_t stream) {
  if (workspace_bytes < grad_norm_workspace_bytes()) return make_error("grad_norm: workspace too small");
  double* partial = static_cast<double*>(workspace);
  sum_squares_partial_kernel<<<kReduceBlocks, kReduceThreads, 0, stream>>>(partial, grad, n);
  GL_CUDA_CHECK_LAUNCH();
  norm_final_kernel<<<1, 32, 0, stream>>>(norm_out, partial, kReduceBlocks);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status adamw_step(float* value, float* grad, float* m, float* v, long n, const float* norm,
                  const AdamWStep& s, cudaStream_t stream) {
  // Bias corrections in fp32 with std::pow, as AdamW::step.
  const float bias1 = 1.0f - std::pow(s.beta1, (float)s.t);
  const float bias2 = 1.0f - std::pow(s.beta2, (float)s.t);
  adamw_kernel<<<grid_for(n, 256), 256, 0, stream>>>(value, grad, m, v, n, norm, s.lr, s.beta1,
                                                      s.beta2, s.eps, s.weight_decay, s.clip_norm,
                                                      bias1, bias2);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

}  // namespace golinear::kernels::cuda
