// Rotary position embedding, half-rotation (NeoX) form: dim i pairs with i + D/2.
#pragma once

#include <vector>

namespace golinear::kernels::cpu {

// x (T, N, D) rotated in place; token t sits at absolute position pos0 + t; inv_freq (D/2).
void rope_forward(float* x, const float* inv_freq, int T, int N, int D, long pos0);

// Rotation by −θ: the gradient of rope_forward (it is orthogonal). dx (T, N, D) in place.
void rope_backward(float* dx, const float* inv_freq, int T, int N, int D, long pos0);

}  // namespace golinear::kernels::cpu
