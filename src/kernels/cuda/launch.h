// Kernel launches: the SMs a grid is sized by, and launches with attributes the triple-chevron
// syntax cannot give.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace golinear::kernels::cuda {

// The SMs of device 0, asked once (132 if the query fails): what the decode step's persistent
// GEMV and the hybrid decode kernel's column split are sized by.
inline int sm_count() {
  static const int sms = [] {
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) n = 132;
    return n;
  }();
  return sms;
}

// The shared-memory carveout (percent of the SM's 228 KiB; cudaFuncAttributePreferredSharedMemoryCarveout)
// every programmatic dependent asks for. Kernels of a chain share an SM only while they agree on
// the split between L1 and shared memory: with each asking for its own, an SM holding the GEMV's
// blocks drains before the hybrid decode kernel's (≈ 104 KiB) can start beside them. 50% (a 132
// KiB configuration: one split decode block and three GEMV blocks) was −0.044 ms a batch-1 8B
// hybrid step against each kernel's default; 60% −0.024, 75% −0.01, 100% +0.08
// (docs/BENCHMARKS.md session 24).
inline constexpr int kDependentCarveout = 50;

// A launch with the kernel's shared-memory carveout (cudaFuncAttributePreferredSharedMemoryCarveout,
// percent; set on every launch, as the other launchers set their attributes): as a programmatic
// dependent (launch_dependent's contract, below) or an ordinary launch.
template <class... Params, class... Args>
cudaError_t launch_kernel(int carveout, bool dependent, void (*kernel)(Params...), dim3 grid,
                          dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  if (const cudaError_t e =
          cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, carveout);
      e != cudaSuccess)
    return e;
  cudaLaunchAttribute pdl{};
  pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = &pdl;
  cfg.numAttrs = dependent ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// Launches `kernel` as a programmatic dependent of the kernel before it on `stream`: it may start
// once that one calls device::pdl_trigger() and must call device::pdl_wait() before it reads or
// writes anything but constants (device_utils.cuh; the model's weights are constants through a
// decode step: the GEMV loads its first weights before the wait). The decode step's chain: each
// GEMV starts the small kernel after it (norm, qkv split, SwiGLU) at once, and the norm and
// SwiGLU start the next GEMV, so that their blocks are resident when the kernel before them ends.
// Every such kernel asks for kDependentCarveout.
template <class... Params, class... Args>
cudaError_t launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                             cudaStream_t stream, Args&&... args) {
  return launch_kernel(kDependentCarveout, true, kernel, grid, block, smem, stream,
                       std::forward<Args>(args)...);
}

}  // namespace golinear::kernels::cuda
