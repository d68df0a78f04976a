#include "kernels/cpu/linear.h"

#include <cblas.h>

namespace golinear::kernels::cpu {

// A few rows (decode): a matrix-vector product, memory-bound, split over the output rows with
// OpenMP. OpenBLAS would start its own threads for it and fight the OpenMP team for the cores.
static void linear_forward_few_rows(float* out, const float* x, const float* w, const float* bias,
                                    int T, int K, int N) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* wr = w + (long)n * K;
    for (int t = 0; t < T; ++t) {
      const float* xr = x + (long)t * K;
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // 8 partial sums: the loop vectorizes
      int k = 0;
      for (; k + 8 <= K; k += 8)
        for (int j = 0; j < 8; ++j) acc[j] += xr[k + j] * wr[k + j];
      float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
      for (; k < K; ++k) sum += xr[k] * wr[k];
      out[(long)t * N + n] = sum + (bias ? bias[n] : 0.0f);
    }
  }
}

void linear_forward(float* out, const float* x, const float* w, const float* bias, int T, int K,
                    int N) {
  if (T <= 4) {
    linear_forward_few_rows(out, x, w, bias, T, K, N);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, N, K, 1.0f, x, K, w, K, 0.0f, out, N);
  if (bias) {
    for (int t = 0; t < T; ++t)
      for (int n = 0; n < N; ++n) out[(long)t * N + n] += bias[n];
  }
}

void linear_backward(float* dx, float* dw, float* dbias, const float* dout, const float* x,
                     const float* w, int T, int K, int N) {
  if (dx)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, K, N, 1.0f, dout, N, w, K, 1.0f, dx,
                K);
  if (dw)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, T, 1.0f, dout, N, x, K, 1.0f, dw, K);
  if (dbias) {
    for (int t = 0; t < T; ++t)
      for (int n = 0; n < N; ++n) dbias[n] += dout[(long)t * N + n];
  }
}

void linear_forward_reference(float* out, const float* x, const float* w, const float* bias, int T,
                              int K, int N) {
  for (int t = 0; t < T; ++t) {
    for (int n = 0; n < N; ++n) {
      double acc = bias ? bias[n] : 0.0;
      for (int k = 0; k < K; ++k) acc += (double)x[(long)t * K + k] * w[(long)n * K + k];
      out[(long)t * N + n] = (float)acc;
    }
  }
}

}  // namespace golinear::kernels::cpu
