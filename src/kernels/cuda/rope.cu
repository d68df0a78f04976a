// Rotary position embedding: the (cos, sin) table, the in-place rotation of bf16 rows and the
// backward on fp32 gradients (rope.h). One thread per (token, frequency), every head.
#include "kernels/cuda/rope.h"

#include "kernels/cuda/device_utils.cuh"

namespace golinear::kernels::cuda {

namespace {

using device::grid_for;

// cs (T, D/2) = (cos, sin) of (pos0 + t) · inv_freq[i], fp32 angle as the CPU reference.
__global__ void rope_table_kernel(float2* cs, const float* inv_freq, int T, int half, long pos0) {
  const long total = (long)T * half;
  for (long idx = blockIdx.x * (long)blockDim.x + threadIdx.x; idx < total;
       idx += (long)gridDim.x * blockDim.x) {
    const int i = (int)(idx % half);
    const int t = (int)(idx / half);
    float s, c;
    sincosf((float)(pos0 + t) * inv_freq[i], &s, &c);
    cs[idx] = make_float2(c, s);
  }
}

// One thread per (token, frequency): the angle's sincos once, applied to every head. Token t at
// position pos0 + t, or positions[t] when given.
__global__ void rope_kernel(bf16* x, const float* inv_freq, int T, int N, int D, long pos0,
                            const long* positions, float sign) {
  const int half = D / 2;
  const long total = (long)T * half;
  for (long idx = blockIdx.x * (long)blockDim.x + threadIdx.x; idx < total;
       idx += (long)gridDim.x * blockDim.x) {
    const int i = (int)(idx % half);
    const int t = (int)(idx / half);
    const long pos = positions ? positions[t] : pos0 + t;
    const float angle = (float)pos * inv_freq[i];  // fp32 angle, as the CPU reference
    float s, c;
    sincosf(angle, &s, &c);
    s *= sign;
    for (int n = 0; n < N; ++n) {
      bf16* row = x + ((long)t * N + n) * D;
      const float a = __bfloat162float(row[i]), b = __bfloat162float(row[i + half]);
      row[i] = __float2bfloat16(a * c - b * s);
      row[i + half] = __float2bfloat16(b * c + a * s);
    }
  }
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

}  // namespace

Status rope_table(float2* cs, const float* inv_freq, int T, int D, long pos0, cudaStream_t stream) {
  rope_table_kernel<<<grid_for((long)T * D / 2, 256), 256, 0, stream>>>(cs, inv_freq, T, D / 2, pos0);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status rope_apply(bf16* x, const float* inv_freq, int T, int N, int D, long pos0, int sign,
                  cudaStream_t stream) {
  rope_kernel<<<grid_for((long)T * D / 2, 256), 256, 0, stream>>>(x, inv_freq, T, N, D, pos0,
                                                                        nullptr, (float)sign);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status rope_apply_at(bf16* x, const float* inv_freq, int T, int N, int D, const long* positions,
                     cudaStream_t stream) {
  rope_kernel<<<grid_for((long)T * D / 2, 256), 256, 0, stream>>>(x, inv_freq, T, N, D, 0,
                                                                        positions, 1.0f);
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

}  // namespace golinear::kernels::cuda
