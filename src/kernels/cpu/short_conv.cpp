#include "kernels/cpu/short_conv.h"

namespace golinear::kernels::cpu {

template <class S>
void short_conv_forward(S* y, const S* x, const S* w, int T, int N) {
  const int K = kShortConvWidth;
  for (int t = 0; t < T; ++t) {
    S* yt = y + (long)t * N;
    for (int c = 0; c < N; ++c) yt[c] = S(0);
    for (int i = 0; i < K; ++i) {
      const int src = t - (K - 1) + i;
      if (src < 0) continue;
      const S* xs = x + (long)src * N;
      for (int c = 0; c < N; ++c) yt[c] += w[(long)c * K + i] * xs[c];
    }
  }
}

template <class S>
void short_conv_backward(S* dx, S* dw, const S* dy, const S* x, const S* w, int T, int N) {
  const int K = kShortConvWidth;
  for (int t = 0; t < T; ++t) {
    const S* dyt = dy + (long)t * N;
    for (int i = 0; i < K; ++i) {
      const int src = t - (K - 1) + i;
      if (src < 0) continue;
      const S* xs = x + (long)src * N;
      S* dxs = dx + (long)src * N;
      for (int c = 0; c < N; ++c) {
        dxs[c] += w[(long)c * K + i] * dyt[c];
        dw[(long)c * K + i] += dyt[c] * xs[c];
      }
    }
  }
}

template void short_conv_forward<float>(float*, const float*, const float*, int, int);
template void short_conv_forward<double>(double*, const double*, const double*, int, int);
template void short_conv_backward<float>(float*, float*, const float*, const float*, const float*,
                                         int, int);
template void short_conv_backward<double>(double*, double*, const double*, const double*,
                                          const double*, int, int);

}  // namespace golinear::kernels::cpu
