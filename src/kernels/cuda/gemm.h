// Matrix products on the GPU, row-major like the CPU reference (kernels/cpu/linear.h): bf16 or
// fp32 inputs, fp32 compute. Hugging Face weights are (out, in), so the forward is "NT"
// (y = x Wᵀ) and the input gradient "NN" (dx = dy W); weight gradients are "TN".
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_common.h"

namespace golinear::kernels::cuda {

// cuBLAS workspaces. cublasSetStream resets a handle to cuBLAS's default workspace pool, which
// the streams of the process share; while several streams run at once cuBLAS may then pick other
// kernels, so results differ from run to run (cuBLAS docs, "Results reproducibility": measured
// here as the pipelined attention transfer's loss drifting 1% from run to run). A handle given a
// workspace of its own keeps it: every product below binds its stream with gemm_bind_stream,
// which puts the handle's workspace back after a stream change. The caller keeps the memory
// alive until gemm_release_workspace(handle), which must come before cublasDestroy(handle).
inline constexpr size_t kCublasWorkspaceBytes = 32u << 20;  // the size NVIDIA gives for Hopper
Status gemm_use_workspace(cublasHandle_t handle, void* workspace, size_t bytes);
void gemm_release_workspace(cublasHandle_t handle);
// Makes `stream` the handle's stream (a no-op when it already is), with its own workspace.
Status gemm_bind_stream(cublasHandle_t handle, cudaStream_t stream);

// C (M, N) = A (M, K) · Bᵀ + beta · C, B (N, K) row-major; A, B bf16, C fp32 (c_is_bf16 false) or
// bf16; fp32 compute. beta = 1 with fp32 C adds into the residual stream. M = 1 (a decode step)
// runs our own bandwidth-bound GEMV when K % 8 == 0 and K ≤ 24576, cuBLAS otherwise.
Status gemm_nt(cublasHandle_t handle, void* C, bool c_is_bf16, const bf16* A, const bf16* B,
               long M, int N, int K, float beta, cudaStream_t stream);
// gemm_nt with beta = 0.
Status gemm_bf16_nt(cublasHandle_t handle, void* C, bool c_is_bf16, const bf16* A, const bf16* B,
                    int M, int N, int K, cudaStream_t stream);

// C (M, N) fp32 = A (M, K) · B (K, N) + beta · C, row-major, B a weight stored (K, N) (e.g. a
// Hugging Face (out, in) matrix used as dX = dY · W). bf16 inputs, fp32 compute (cublasGemmEx).
Status gemm_bf16_nn(cublasHandle_t handle, float* C, float beta, const bf16* A, const bf16* B,
                    int M, int N, int K, cudaStream_t stream);
// The same in fp32 throughout (cublasSgemm).
Status gemm_f32_nn(cublasHandle_t handle, float* C, float beta, const float* A, const float* B,
                   int M, int N, int K, cudaStream_t stream);

// dW (N, C) fp32 += dOutᵀ x for dOut (T, N) and x (T, C) bf16, fp32 accumulation (cublasGemmEx).
Status gemm_bf16_tn_accumulate(cublasHandle_t handle, float* dW, const bf16* dout, const bf16* x,
                               int T, int N, int C, cudaStream_t stream);

}  // namespace golinear::kernels::cuda
