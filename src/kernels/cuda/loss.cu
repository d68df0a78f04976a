// The attention-transfer loss (normalized MSE) and the distillation loss (per-row KL) with their
// gradients (loss.h). Reductions in fp64 and a fixed order: the same inputs give the same bits.
#include "kernels/cuda/loss.h"

#include <cmath>

#include "kernels/cuda/device_utils.cuh"

namespace golinear::kernels::cuda {

namespace {

using device::block_max;
using device::block_sum;
using device::block_sum_double;
using device::grid_for;
using device::warp_sum_double;

constexpr int kThreads = 256;        // kl_rows_kernel's block
constexpr int kReduceBlocks = 1024;  // partial sums per reduction (fixed: deterministic order)
constexpr int kReduceThreads = 256;

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

__global__ void nmse_final_kernel(double* sums, const double* partial, int blocks) {
  double err = 0.0, ref = 0.0;
  for (int b = threadIdx.x; b < blocks; b += 32) err += partial[2 * b], ref += partial[2 * b + 1];
  err = warp_sum_double(err);
  ref = warp_sum_double(ref);
  if (threadIdx.x == 0) sums[0] = err, sums[1] = ref;
}

__global__ void nmse_grad_kernel(float* dy, const float* s, const bf16* t, long n,
                                 const double* sums, float scale) {
  const double ref = fmax(sums[1], 1e-12);
  const float factor = (float)(2.0 / ref) * scale;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x)
    dy[i] = factor * (s[i] - __bfloat162float(t[i]));
}

__global__ void kl_rows_kernel(double* kl, float* dlogits, const float* teacher,
                               const float* student, int V, float scale) {
  __shared__ double shared[kThreads / 32];
  __shared__ float shared_f[kThreads / 32];
  const long row = blockIdx.x;
  const float* a = teacher + row * V;
  const float* b = student + row * V;
  float ma = -INFINITY, mb = -INFINITY;
  for (int i = threadIdx.x; i < V; i += kThreads) {
    ma = fmaxf(ma, a[i]);
    mb = fmaxf(mb, b[i]);
  }
  ma = block_max(ma, shared_f);
  mb = block_max(mb, shared_f);
  double za = 0, zb = 0;
  for (int i = threadIdx.x; i < V; i += kThreads) {
    za += exp((double)a[i] - ma);
    zb += exp((double)b[i] - mb);
  }
  za = block_sum(za, shared);
  zb = block_sum(zb, shared);
  const double lza = log(za), lzb = log(zb);
  double sum = 0;
  for (int i = threadIdx.x; i < V; i += kThreads) {
    const double log_pa = (double)a[i] - ma - lza, log_pb = (double)b[i] - mb - lzb;
    const double pa = exp(log_pa);
    sum += pa * (log_pa - log_pb);
    if (dlogits) dlogits[row * V + i] = (float)((exp(log_pb) - pa) * scale);
  }
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) kl[row] = sum;
}

__global__ void next_token_nll_kernel(double* nll, const float* logits, const int32_t* ids,
                                      int V) {
  __shared__ double shared[kThreads / 32];
  __shared__ float shared_f[kThreads / 32];
  const long row = blockIdx.x;
  const float* x = logits + row * V;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < V; i += kThreads) m = fmaxf(m, x[i]);
  m = block_max(m, shared_f);
  double z = 0;
  for (int i = threadIdx.x; i < V; i += kThreads) z += exp((double)x[i] - m);
  z = block_sum(z, shared);
  if (threadIdx.x == 0) {
    const int32_t target = ids[row + 1];
    nll[row] = target >= 0 && target < V ? m + log(z) - (double)x[target] : (double)NAN;
  }
}

}  // namespace

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

Status nmse_partials_reduce(double* sums, const double* partial, int blocks,
                            cudaStream_t stream) {
  nmse_final_kernel<<<1, 32, 0, stream>>>(sums, partial, blocks);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status kl_rows_forward_backward(double* kl, float* dlogits, const float* teacher,
                                const float* student, int T, int V, float scale,
                                cudaStream_t stream) {
  if (T <= 0) return ok_status();
  kl_rows_kernel<<<T, kThreads, 0, stream>>>(kl, dlogits, teacher, student, V, scale);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status next_token_nll_rows(double* nll, const float* logits, const int32_t* ids, int T, int V,
                           cudaStream_t stream) {
  if (T <= 1) return ok_status();
  next_token_nll_kernel<<<T - 1, kThreads, 0, stream>>>(nll, logits, ids, V);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

}  // namespace golinear::kernels::cuda
