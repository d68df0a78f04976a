// Short causal depthwise convolution over time (DESIGN.md §3.1): width 4, no activation.
//   y_t,c = Σ_{i<4} w_c,i · x_{t−3+i, c}   (x before the first token is 0; tap 3 is the current
//   token, so w = (0, 0, 0, 1) is the identity).
// Templated on the scalar. Gradient convention: the backward accumulates (+=).
#pragma once

namespace golinear::kernels::cpu {

inline constexpr int kShortConvWidth = 4;

// y, x (T, N) with N channels; w (N, 4).
template <class S>
void short_conv_forward(S* y, const S* x, const S* w, int T, int N);

// dx (T, N) += ∂/∂x, dw (N, 4) += ∂/∂w of Σ dy·y.
template <class S>
void short_conv_backward(S* dx, S* dw, const S* dy, const S* x, const S* w, int T, int N);

}  // namespace golinear::kernels::cpu
