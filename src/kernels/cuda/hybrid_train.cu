// Training kernels of the hybrid mixer: gates and mix gate (hybrid_train.h).
#include "kernels/cuda/hybrid_train.h"

#include <algorithm>
#include <cmath>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/loss.h"

namespace golinear::kernels::cuda {

namespace {

using device::block_sum_double;

// Partial sums of mix_gate_nmse_forward: the count loss.cu's nmse_workspace_bytes holds.
constexpr int kReduceBlocks = 1024;
constexpr int kReduceThreads = 256;

unsigned grid_for(long n, int threads) {
  return (unsigned)std::max(1L, std::min<long>((n + threads - 1) / threads, 1L << 16));
}

// ---- gates ---------------------------------------------------------------------------------

// One block per head h: loops over t in order, writes the a, b logit gradients and sums the
// four per-head parameter gradients.
__global__ void gates_backward_kernel(float* dlogits, float* dA_log, float* ddt_bias,
                                      float* db_beta, float* db_lambda, const float* dg,
                                      const float* dbeta, const float* logits, const float* g,
                                      const float* beta, const float* A_log, const float* dt_bias,
                                      int T, int H) {
  __shared__ double scratch[32];
  const int h = blockIdx.x;
  const float decay = expf(A_log[h]);
  double sum_a = 0, sum_u = 0, sum_z = 0, sum_l = 0;
  for (int t = threadIdx.x; t < T; t += blockDim.x) {
    const long row = (long)t * H + h;
    float* lrow = dlogits + (long)t * 3 * H;
    const float u = logits[(long)t * 3 * H + h] + dt_bias[h];
    // g = −exp(A_log)·softplus(u): ∂g/∂A_log = g, ∂g/∂u = −exp(A_log)·σ(u).
    const float du = dg[row] * -decay * device::sigmoidf_(u);
    const float b = beta[row];
    const float dz = dbeta[row] * b * (1.0f - b);
    lrow[h] = du;
    lrow[H + h] = dz;
    sum_a += (double)dg[row] * g[row];
    sum_u += du;
    sum_z += dz;
    sum_l += lrow[2 * H + h];
  }
  sum_a = block_sum_double(sum_a, scratch);
  sum_u = block_sum_double(sum_u, scratch);
  sum_z = block_sum_double(sum_z, scratch);
  sum_l = block_sum_double(sum_l, scratch);
  if (threadIdx.x == 0) {
    dA_log[h] += (float)sum_a;
    ddt_bias[h] += (float)sum_u;
    db_beta[h] += (float)sum_z;
    db_lambda[h] += (float)sum_l;
  }
}

// ---- mixing --------------------------------------------------------------------------------

__global__ void mix_gate_forward_kernel(float* y, const bf16* y_exact, const bf16* y_lin,
                                        const float* lambda, long rows, int D) {
  const long total = rows * D;
  for (long idx = blockIdx.x * (long)blockDim.x + threadIdx.x; idx < total;
       idx += (long)gridDim.x * blockDim.x) {
    const float l = lambda[idx / D];
    y[idx] = (1.0f - l) * __bfloat162float(y_exact[idx]) + l * __bfloat162float(y_lin[idx]);
  }
}

// One warp per (t, h) row.
__global__ void mix_gate_backward_kernel(float* dy_exact, bf16* dy_lin, float* dlogits,
                                         const float* dy, const bf16* y_exact, const bf16* y_lin,
                                         const float* lambda, long rows, int H, int D) {
  const int lane = threadIdx.x % 32;
  for (long row = (blockIdx.x * (long)blockDim.x + threadIdx.x) / 32; row < rows;
       row += (long)gridDim.x * blockDim.x / 32) {
    const float l = lambda[row];
    float dl = 0.0f;
    for (int d = lane; d < D; d += 32) {
      const long i = row * D + d;
      const float g = dy[i];
      dl += g * (__bfloat162float(y_lin[i]) - __bfloat162float(y_exact[i]));
      dy_exact[i] = (1.0f - l) * g;
      dy_lin[i] = __float2bfloat16(l * g);
    }
    dl = device::warp_sum(dl);
    if (lane == 0) {
      const long t = row / H;
      const int h = (int)(row % H);
      dlogits[t * 3 * H + 2 * H + h] = dl * l * (1.0f - l);
    }
  }
}

// nmse_partial_kernel of y = (1 − λ) y_exact + λ y_lin, computed as mix_gate_forward_kernel.
__global__ void mix_nmse_partial_kernel(double* partial, const bf16* y_exact, const bf16* y_lin,
                                        const float* lambda, const bf16* t, long rows, int D) {
  __shared__ double scratch[32];
  double err = 0.0, ref = 0.0;
  const long n = rows * D;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x) {
    const float l = lambda[i / D];
    const float y = (1.0f - l) * __bfloat162float(y_exact[i]) + l * __bfloat162float(y_lin[i]);
    const double tv = __bfloat162float(t[i]);
    const double d = (double)y - tv;
    err += d * d;
    ref += tv * tv;
  }
  err = block_sum_double(err, scratch);
  ref = block_sum_double(ref, scratch);
  if (threadIdx.x == 0) partial[2 * blockIdx.x] = err, partial[2 * blockIdx.x + 1] = ref;
}

// mix_gate_backward_kernel with dy = factor · (y − t) (nmse_grad_kernel) recomputed in place.
__global__ void mix_gate_nmse_backward_kernel(float* dy_exact, bf16* dy_lin, float* dlogits,
                                              const double* sums, float scale, const bf16* t,
                                              const bf16* y_exact, const bf16* y_lin,
                                              const float* lambda, long rows, int H, int D) {
  const double ref_sum = fmax(sums[1], 1e-12);
  const float factor = (float)(2.0 / ref_sum) * scale;
  const int lane = threadIdx.x % 32;
  for (long row = (blockIdx.x * (long)blockDim.x + threadIdx.x) / 32; row < rows;
       row += (long)gridDim.x * blockDim.x / 32) {
    const float l = lambda[row];
    float dl = 0.0f;
    for (int d = lane; d < D; d += 32) {
      const long i = row * D + d;
      const float ye = __bfloat162float(y_exact[i]), yl = __bfloat162float(y_lin[i]);
      const float y = (1.0f - l) * ye + l * yl;
      const float g = factor * (y - __bfloat162float(t[i]));
      dl += g * (yl - ye);
      dy_exact[i] = (1.0f - l) * g;
      dy_lin[i] = __float2bfloat16(l * g);
    }
    dl = device::warp_sum(dl);
    if (lane == 0) {
      const long tt = row / H;
      const int h = (int)(row % H);
      dlogits[tt * 3 * H + 2 * H + h] = dl * l * (1.0f - l);
    }
  }
}

}  // namespace

Status hybrid_gates_backward(float* dlogits, float* dA_log, float* ddt_bias, float* db_beta,
                             float* db_lambda, const float* dg, const float* dbeta,
                             const float* logits, const float* g, const float* beta,
                             const float* A_log, const float* dt_bias, int T, int H,
                             cudaStream_t stream) {
  gates_backward_kernel<<<H, 256, 0, stream>>>(dlogits, dA_log, ddt_bias, db_beta, db_lambda, dg,
                                               dbeta, logits, g, beta, A_log, dt_bias, T, H);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status mix_gate_forward_f32(float* y, const bf16* y_exact, const bf16* y_lin, const float* lambda,
                            int T, int H, int D, cudaStream_t stream) {
  mix_gate_forward_kernel<<<grid_for((long)T * H * D, 256), 256, 0, stream>>>(
      y, y_exact, y_lin, lambda, (long)T * H, D);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status mix_gate_backward(float* dy_exact, bf16* dy_lin, float* dlogits, const float* dy,
                         const bf16* y_exact, const bf16* y_lin, const float* lambda, int T, int H,
                         int D, cudaStream_t stream) {
  mix_gate_backward_kernel<<<grid_for((long)T * H * 32, 256), 256, 0, stream>>>(
      dy_exact, dy_lin, dlogits, dy, y_exact, y_lin, lambda, (long)T * H, H, D);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status mix_gate_nmse_forward(double* sums, const bf16* y_exact, const bf16* y_lin,
                             const float* lambda, const bf16* teacher, int T, int H, int D,
                             void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (workspace_bytes < nmse_workspace_bytes()) return make_error("mix_gate_nmse_forward: workspace too small");
  double* partial = static_cast<double*>(workspace);
  mix_nmse_partial_kernel<<<kReduceBlocks, kReduceThreads, 0, stream>>>(partial, y_exact, y_lin,
                                                                        lambda, teacher, (long)T * H, D);
  GL_CUDA_CHECK_LAUNCH();
  return nmse_partials_reduce(sums, partial, kReduceBlocks, stream);
}

Status mix_gate_nmse_backward(float* dy_exact, bf16* dy_lin, float* dlogits, const double* sums,
                              float scale, const bf16* teacher, const bf16* y_exact,
                              const bf16* y_lin, const float* lambda, int T, int H, int D,
                              cudaStream_t stream) {
  mix_gate_nmse_backward_kernel<<<grid_for((long)T * H * 32, 256), 256, 0, stream>>>(
      dy_exact, dy_lin, dlogits, sums, scale, teacher, y_exact, y_lin, lambda, (long)T * H, H, D);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

}  // namespace golinear::kernels::cuda
