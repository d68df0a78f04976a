// Causal softmax attention with grouped kv heads and an optional sink + window mask.
#pragma once

namespace golinear::kernels::cpu {

// Which keys query t may see: all j ≤ t when window < 0 (full causal attention); otherwise
// E_t = {j < sinks} ∪ {t − window < j ≤ t}.
struct AttentionMask {
  int sinks = 0;
  int window = -1;
  bool allows(long t, long j) const {
    if (j > t) return false;
    if (window < 0) return true;
    return j < sinks || j > t - window;
  }
};

// y (Tq, H, D) = softmax(q kᵀ / √D) v. q (Tq, H, D) holds queries at absolute positions
// pos0 .. pos0+Tq−1; k, v (Tk, G, D) hold keys at positions 0 .. Tk−1 (Tk ≥ pos0 + Tq);
// query head h reads kv head h / (H / G).
// Blocked: per head, 64 queries at a time against the keys their mask allows (all earlier keys,
// or sinks ∪ the window span), scores and P·V as cblas_sgemm on 64×64 blocks, a vectorized exp.
// Checked against attention_forward_reference in tests/kernels/attention_blocked_test.cpp.
// lse (Tq, H), when given, receives each row's log Σ_j exp(q·k_j/√D) over the keys its mask allows.
void attention_forward(float* y, const float* q, const float* k, const float* v, int Tq, int Tk,
                       long pos0, int H, int G, int D, AttentionMask mask,
                       float* lse = nullptr);

// Gradients (+=) for attention_forward with Tk = Tq and pos0 = 0. Blocked as the forward
// (probabilities recomputed), parallel over kv heads.
// dlse (T, H), when given, is the gradient of the loss with respect to lse (the forward's optional
// output): since ∂lse/∂s_j = p_j, the score gradient becomes P ∘ (dP − Σ_j P dP + dlse).
void attention_backward(float* dq, float* dk, float* dv, const float* dy, const float* q,
                        const float* k, const float* v, int T, int H, int G, int D,
                        AttentionMask mask, const float* dlse = nullptr);

// The specifications of the two above: one query and one key at a time, as the math reads.
void attention_forward_reference(float* y, const float* q, const float* k, const float* v, int Tq,
                                 int Tk, long pos0, int H, int G, int D, AttentionMask mask);
void attention_backward_reference(float* dq, float* dk, float* dv, const float* dy,
                                  const float* q, const float* k, const float* v, int T, int H,
                                  int G, int D, AttentionMask mask);

}  // namespace golinear::kernels::cpu
