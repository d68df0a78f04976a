// SwiGLU: out = silu(gate) ⊙ up, with silu(z) = z·σ(z).
#pragma once

namespace golinear::kernels::cpu {

// out (N) = silu(gate (N)) ⊙ up (N).
void swiglu_forward(float* out, const float* gate, const float* up, long N);

// dgate (N) += ∂L/∂gate, dup (N) += ∂L/∂up, given dout (N).
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                     const float* up, long N);

}  // namespace golinear::kernels::cpu
