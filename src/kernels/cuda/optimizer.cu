// The optimizer over one flat fp32 parameter buffer: global gradient norm (fp64 partials in a
// fixed order) and the AdamW step (optimizer.h).
#include "kernels/cuda/optimizer.h"

#include <cmath>

#include "kernels/cuda/device_utils.cuh"

namespace golinear::kernels::cuda {

namespace {

using device::block_sum_double;
using device::grid_for;
using device::warp_sum_double;

constexpr int kReduceBlocks = 1024;  // partial sums per reduction (fixed: deterministic order)
constexpr int kReduceThreads = 256;

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
  if (!isfinite(norm)) return;  // a NaN/Inf gradient (or an overflowed norm): nothing changes
  const float clip = clip_norm > 0 && norm > clip_norm ? clip_norm / norm : 1.0f;
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
