// Row-major cblas_sgemm on small blocks, for the fast fp32 forms of the kernels (chunked linear
// states, blocked attention). Blocks of at most 64×64×64 multiply-adds stay under OpenBLAS's
// threading threshold, so a call runs on the calling thread and is safe inside OpenMP regions.
#pragma once

#include <cblas.h>

namespace golinear::kernels::cpu {

// Multiply-adds per call that OpenBLAS 0.3 runs single-threaded (M·N·K ≤ 65536·4).
inline constexpr long kBlockGemmMaxWork = 64L * 64 * 64;

// C (M, N; row stride ldc) = alpha · op(A) · op(B) + beta · C, op(X) = Xᵀ when its flag is set.
// op(A) (M, K) with A's row stride lda; op(B) (K, N) with B's row stride ldb.
inline void block_gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                       const float* A, int lda, const float* B, int ldb, float beta, float* C,
                       int ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // C = beta · C (BLAS would do the same; spelled out for K = 0 chunks)
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) C[(long)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(long)i * ldc + j];
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace golinear::kernels::cpu
