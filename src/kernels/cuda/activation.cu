// SwiGLU on separate and on stacked [gate; up] inputs, and the stacked form's backward
// (activation.h). Elementwise, grid-stride.
#include "kernels/cuda/activation.h"

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.h"

namespace golinear::kernels::cuda {

namespace {

using device::grid_for;

constexpr int kThreads = 256;

__global__ void swiglu_kernel(bf16* out, const bf16* gate, const bf16* up, long N) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < N; i += (long)gridDim.x * blockDim.x) {
    const float z = __bfloat162float(gate[i]);
    out[i] = __float2bfloat16(z / (1.0f + expf(-z)) * __bfloat162float(up[i]));
  }
}

// A programmatic dependent (launch.h: of the gate/up GEMV in the decode step).
__global__ void swiglu_stacked_kernel(bf16* out, const bf16* gu, int T, int F) {
  device::pdl_trigger();  // the down projection's GEMV may start (its blocks wait for this one)
  device::pdl_wait();
  const long n = (long)T * F;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    const long t = i / F, f = i % F;
    const float g = __bfloat162float(gu[t * 2 * F + f]);
    const float u = __bfloat162float(gu[t * 2 * F + F + f]);
    out[i] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
  }
}

__global__ void swiglu_backward_kernel(bf16* dgu, const float* dact, const bf16* gu, int T, int F) {
  const long n = (long)T * F;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    const long t = i / F, f = i % F;
    const float z = __bfloat162float(gu[t * 2 * F + f]);
    const float u = __bfloat162float(gu[t * 2 * F + F + f]);
    const float sig = 1.0f / (1.0f + expf(-z));
    const float d = dact[i];
    dgu[t * 2 * F + f] = __float2bfloat16(d * u * sig * (1.0f + z * (1.0f - sig)));
    dgu[t * 2 * F + F + f] = __float2bfloat16(d * z * sig);
  }
}

}  // namespace

Status swiglu_forward(bf16* out, const bf16* gate, const bf16* up, long N, cudaStream_t stream) {
  swiglu_kernel<<<grid_for(N, 256), 256, 0, stream>>>(out, gate, up, N);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

Status swiglu_stacked(bf16* out, const bf16* gu, int T, int F, cudaStream_t stream) {
  GL_CUDA_CHECK(launch_dependent(swiglu_stacked_kernel, grid_for((long)T * F, 256), 256, 0, stream,
                                 out, gu, T, F));
  return ok_status();
}

Status swiglu_stacked_backward(bf16* dgu, const float* dact, const bf16* gu, int T, int F,
                               cudaStream_t stream) {
  swiglu_backward_kernel<<<grid_for((long)T * F, kThreads), kThreads, 0, stream>>>(dgu, dact, gu, T, F);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

}  // namespace golinear::kernels::cuda
