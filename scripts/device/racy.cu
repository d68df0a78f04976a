// Built here: nvcc -O2 -arch=sm_90a -o carry2/racy scripts/device/racy.cu (session12_call1.sh runs it).
// A deliberate shared-memory race, in and outside namespace golinear: the check that the
// racecheck filter (--kernel-name kns=golinear) still instruments golinear's kernels.
#include <cstdio>
namespace golinear { namespace {
__global__ void racy_kernel(int* out) {
  __shared__ int s[32];
  s[threadIdx.x % 32] = threadIdx.x;  // warps 0..3 write the same words, no barrier
  out[threadIdx.x] = s[(threadIdx.x + 1) % 32];
}
} }
__global__ void other_racy_kernel(int* out) {
  __shared__ int s[32];
  s[threadIdx.x % 32] = threadIdx.x;
  out[threadIdx.x] = s[(threadIdx.x + 1) % 32];
}
int main() {
  int* d; cudaMalloc(&d, 128 * sizeof(int));
  golinear::racy_kernel<<<1, 128>>>(d);
  other_racy_kernel<<<1, 128>>>(d);
  cudaError_t e = cudaDeviceSynchronize();
  std::printf("racy done: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
