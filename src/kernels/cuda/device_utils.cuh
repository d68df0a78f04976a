// Device-side helpers shared by the .cu files of kernels/cuda (not a public header), and the
// host-side sizes of their launchers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace golinear::kernels::cuda::device {

// x rounded up to a multiple of `alignment` (workspace carving: 256 bytes; shared-memory
// sections: 128).
constexpr size_t align_up(size_t x, size_t alignment = 256) {
  return (x + alignment - 1) / alignment * alignment;
}
// Blocks of `threads` threads covering n items: ceil(n / threads) clamped to [1, max_blocks] (an
// empty launch is an error; the kernels' grid-stride loops cover the rest).
inline unsigned grid_for(long n, int threads, long max_blocks = 1L << 20) {
  return (unsigned)std::max(1L, std::min<long>((n + threads - 1) / threads, max_blocks));
}

// 16-byte asynchronous global → shared copy; zero-fills the destination when !valid.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

// Two floats rounded to bf16 and packed into one 32-bit register, lo in the low half (the layout of
// the tensor cores' bf16 operand fragments).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// log2 e: softmax kernels work in exp2 with scores and lse scaled by it.
inline constexpr float kLog2e = 1.4426950408889634f;

// 2^x by one MUFU.EX2, results below 2^-126 flushed to zero. exp2f (without --use_fast_math)
// adds a range test and two multiplies per call to keep those denormal results: in the flash
// attention kernels that was a third of the softmax's instructions (docs/BENCHMARKS.md,
// session 10), for probabilities below 1e-38 that no bf16 product can carry anyway.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Programmatic dependent launch (Hopper): a kernel launched with the attribute
// cudaLaunchAttributeProgrammaticStreamSerialization (launch.h's launch_dependent: the decode
// step's GEMV, norm, qkv split and SwiGLU) may start while the kernel before it on the stream
// still runs, and must call pdl_wait() before it reads or writes anything that kernel (or one
// before it) may touch — what it reads before is constant (the norm's weights). pdl_trigger()
// lets such a next kernel start now; its pdl_wait() still waits for this whole grid to finish
// and its writes to be visible. pdl_wait() returns at once in a kernel launched the ordinary
// way; pdl_trigger() changes nothing before one.
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void pdl_trigger() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}
__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(float x) { return x; }

// Sum over a block of blockDim.x threads (a multiple of 32, ≤ 1024); `scratch` holds 32 floats.
// Every thread gets the total.
__device__ __forceinline__ float block_sum(float x, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  x = warp_sum(x);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  float total = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(total);
}

// fp64 reductions in a fixed order (the same inputs give the same bits on every run).
// Sum over a block of blockDim.x threads (a multiple of 32); `scratch` holds blockDim.x / 32
// doubles. Every thread gets the total (the warps' sums added in warp order).
__device__ __forceinline__ double block_sum(double v, double* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  double total = 0;
  for (int w = 0; w < (int)blockDim.x / 32; ++w) total += scratch[w];
  return total;
}
// The same sum, valid in thread 0 only; `scratch` holds 32 doubles.
__device__ __forceinline__ double block_sum_double(double x, double* scratch) {
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
// One warp: a fixed butterfly (callers sum their strided partials in order first).
__device__ __forceinline__ double warp_sum_double(double x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}
// Maximum over a block of blockDim.x threads (a multiple of 32); `scratch` holds blockDim.x / 32
// floats. Every thread gets the result.
__device__ __forceinline__ float block_max(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = scratch[0];
  for (int w = 1; w < (int)blockDim.x / 32; ++w) m = fmaxf(m, scratch[w]);
  return m;
}

__device__ __forceinline__ float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float softplusf_(float x) { return x > 20.0f ? x : log1pf(expf(x)); }


}  // namespace golinear::kernels::cuda::device
