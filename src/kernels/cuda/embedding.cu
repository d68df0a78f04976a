// The token embedding gather (embedding.h).
#include "kernels/cuda/embedding.h"

#include "kernels/cuda/device_utils.cuh"

namespace golinear::kernels::cuda {

namespace {

using device::grid_for;

__global__ void embed_gather_kernel(float* h, const bf16* embed, const int32_t* ids, int T, int C) {
  const long n = (long)T * C;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    const long t = i / C, c = i % C;
    h[i] = __bfloat162float(embed[(long)ids[t] * C + c]);
  }
}

}  // namespace

Status embed_gather(float* h, const bf16* embed, const int32_t* ids, int T, int C,
                    cudaStream_t stream) {
  embed_gather_kernel<<<grid_for((long)T * C, 256), 256, 0, stream>>>(h, embed, ids, T, C);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

}  // namespace golinear::kernels::cuda
