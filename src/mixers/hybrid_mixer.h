// The hybrid mixers of DESIGN.md §3: short conv → exact softmax over sinks ∪ window, plus a
// linear state over the tokens that have left the window, combined by a gate (or add, scale).
// One frame for every state kind; only the state update differs:
//
//   gdn       S_j = α_j (I − β_j k̂_j k̂_jᵀ) S_{j−1} + β_j k̂_j ṽ_jᵀ         (kernels/cpu/gated_delta.h)
//             g_j = −exp(A_log_h)·softplus(w_a,h·x_j + dt_bias_h), α = e^g, β = σ(w_b,h·x_j + b_beta_h)
//   gla       S_j = diag(α_j) S_{j−1} + k̂_j ṽ_jᵀ,  log α_j = logsigmoid(W_up W_down x_j + b_decay)/16
//             (rank 16, W_down shared by the heads, as flash-linear-attention's gk_proj)
//   kgla      as gla, log α_j,h = logsigmoid(W_key_decay,h k̂_j + b_key_decay,h)/16: a per-head
//             (D, D) map of the unit key (the decay depends on what is stored, not on x)
//   hedgehog  S_j = S_{j−1} + φ_k(k̂_j) ṽ_jᵀ, z_j = z_{j−1} + φ_k(k̂_j),
//             y_lin = φ_q(q̂)ᵀS / φ_q(q̂)ᵀz (0 while the state is empty),
//             φ(u) = softmax([W u, −W u]) over 2D features, separate per-head W for q and k
//             (identity at init). S and z are one state with value [ṽ, 1] (Dv = D + 1).
//   none      no linear branch: the exact branch alone (the `--mixer none` baseline).
//
// The linear branch reads q̂_t, k̂_j: the convolved q̃, k̃ (RoPE'd first when linear_rope) over
// their norm, x/sqrt(‖x‖² + 1e-6); keys and values of kv head g serve the H/G query heads of its
// group, each query head has its own state. Token j enters the state only when j ≥ s, and query t
// reads S_{t−w}: the state of the tokens s ≤ j ≤ t − w, disjoint from the exact keys
// E_t = {j < s} ∪ {t − w < j ≤ t}. With s = w = 0 this is pure replacement, y_t = q̂_tᵀ S_t.
//
// Mixing: gate y = (1 − λ) y_exact + λ y_lin, λ_t,h = σ(w_λ,h·x_t + b_λ,h); gate-lse the same with
// λ_t,h = σ(w_λ,h·x_t + b_λ,h − c_h·lse_t,h), lse_t,h = log Σ_{j∈E_t} exp(q_t,h·k_j/√D) of the
// exact branch (RoPE'd q̃, k̃), its gradient flowing back into q and k; split (from the softmax
// split Z_far / (Z_far + Z_exact)) λ_t,h = σ(a_h·log n_far(t) + w_λ,h·x_t + b_λ,h − c_h·lse_t,h)
// with n_far(t) = t − s − w + 1 the tokens in the state, and λ = 0 while n_far ≤ 0 (y = y_exact
// exactly); a = c = 1 is the split itself, a = c = 0 (the init) the gate masked where no token
// is far; add b = 1; scale b = γ_h.
//
// Delayed read as a shift: the state kernels compute o_n = S_nᵀ q_n over a sequence of N tokens.
// Feed them keys (and values, gates) from row s on and queries from row s + w on:
// kernel step n then holds S after token s + n and reads it with query s + w + n, i.e. query t
// reads S_{t−w}. Queries t < s + w read the zero state: y_lin_t = 0 (and stay 0 in every form).
//
// Parameters (checkpoint names; only those the options use):
//   conv_q (H·D, 4), conv_k (G·D, 4), conv_v (G·D, 4)            conv on; identity init (0,0,0,1)
//   w_lambda (H, C), b_lambda (H)                                 gate mixes; init 0 and −2
//   c_lse (H)                                                     gate-lse, split; init 0
//   a_far (H)                                                     split; init 0
//   gamma (H)                                                     mix scale; init 0
//   w_a, w_b (H, C), b_beta, A_log, dt_bias (H)                   gdn; see below
//   w_decay_down (16, C), w_decay_up (H·D, 16), b_decay (H·D)     gla
//   w_key_decay (H, D, D), b_key_decay (H, D)                     kgla
//   w_feature_q, w_feature_k (H, D, D)                            hedgehog; identity init
// Mixing parameters exist only when both branches do (s + w > 0 and kind ≠ none).
// Initialisation, deterministic from the seed (std::mt19937_64 with our own uniform and
// Box–Muller transforms, identical on every platform), following flash-linear-attention's
// GatedDeltaNet: A_log = log U(1, 16); dt = exp U(log 1e-3, log 1e-1) (≥ 1e-4),
// dt_bias = dt + log(−expm1(−dt)) (the inverse softplus); w_a, w_b ~ N(0, 0.02²); b_beta = 0
// (β = 0.5). gla/kgla: weights ~ N(0, 0.02²), biases 0 (α ≈ 0.957 per token).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mixers/mixer.h"
#include "mixers/mixer_factory.h"

namespace golinear::mixers {

// Rank of GLA's low-rank decay projection.
inline constexpr int kDecayRank = 16;

// Every tensor a hybrid mixer may own, null when its options do not use it. P is `const S*`
// (values) or `S*` (gradients). Shapes as in the file comment.
template <class P>
struct HybridTensors {
  P conv_q{}, conv_k{}, conv_v{};
  P w_lambda{}, b_lambda{}, gamma{}, c_lse{}, a_far{};
  P w_a{}, w_b{}, b_beta{}, A_log{}, dt_bias{};
  P w_decay_down{}, w_decay_up{}, b_decay{};
  P w_key_decay{}, b_key_decay{};
  P w_feature_q{}, w_feature_k{};
};

// The member of `tensors` a checkpoint name refers to; null for an unknown name.
template <class P>
P* hybrid_tensor_slot(HybridTensors<P>& tensors, std::string_view name) {
  HybridTensors<P>& t = tensors;
  if (name == "conv_q") return &t.conv_q;
  if (name == "conv_k") return &t.conv_k;
  if (name == "conv_v") return &t.conv_v;
  if (name == "w_lambda") return &t.w_lambda;
  if (name == "b_lambda") return &t.b_lambda;
  if (name == "gamma") return &t.gamma;
  if (name == "c_lse") return &t.c_lse;
  if (name == "a_far") return &t.a_far;
  if (name == "w_a") return &t.w_a;
  if (name == "w_b") return &t.w_b;
  if (name == "b_beta") return &t.b_beta;
  if (name == "A_log") return &t.A_log;
  if (name == "dt_bias") return &t.dt_bias;
  if (name == "w_decay_down") return &t.w_decay_down;
  if (name == "w_decay_up") return &t.w_decay_up;
  if (name == "b_decay") return &t.b_decay;
  if (name == "w_key_decay") return &t.w_key_decay;
  if (name == "b_key_decay") return &t.b_key_decay;
  if (name == "w_feature_q") return &t.w_feature_q;
  if (name == "w_feature_k") return &t.w_feature_k;
  return nullptr;
}

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

// Names and shapes of the tensors `options` use, in checkpoint order.
std::vector<TensorSpec> hybrid_tensor_specs(const MixerOptions& options,
                                            const AttentionShape& shape);

// One whole sequence from position 0 in scalar S. x (T, C); q (T, H, D); k, v (T, G, D) before
// RoPE; inv_freq (D/2).
template <class S>
struct HybridInputs {
  int T = 0;
  const S* x = nullptr;
  const S* q = nullptr;
  const S* k = nullptr;
  const S* v = nullptr;
  const float* inv_freq = nullptr;
};

// Input gradients (+=); any may be null. Shapes as HybridInputs.
template <class S>
struct HybridInputGrads {
  S* dx = nullptr;
  S* dq = nullptr;
  S* dk = nullptr;
  S* dv = nullptr;
};

// Which form computes the linear state over a whole sequence. Both give the same result.
enum class StateForm { chunked, recurrent };

// y (T, H, D) for the whole sequence; float in the mixer, double in gradient checks.
template <class S>
void hybrid_forward(const MixerOptions& options, const AttentionShape& shape,
                    const HybridTensors<const S*>& params, const HybridInputs<S>& in, S* y,
                    StateForm form = StateForm::chunked);

// Gradients of Σ dy·y: parameters into `param_grads` (+=, members null where unused), inputs
// into `input_grads` (+=). dy (T, H, D). Recomputes the forward.
template <class S>
void hybrid_backward(const MixerOptions& options, const AttentionShape& shape,
                     const HybridTensors<const S*>& params, const HybridTensors<S*>& param_grads,
                     const HybridInputs<S>& in, const S* dy, const HybridInputGrads<S>& input_grads);

// The Mixer: owns the parameters (fp32) and runs hybrid_forward/backward<float>; its decode cache
// (DESIGN.md §6) holds, per sequence, a fixed amount of memory:
//   sinks   RoPE'd k̃ and ṽ of the first s tokens, (s, G, D) each;
//   window  a ring of w slots (slot j mod w holds token j): RoPE'd k̃, ṽ (G, D) for the exact
//           branch and the token's state entry (its key features (H, Dk), values (H, Dv), decay
//           g and β), pushed into the state when the token leaves the window;
//   state   (H, Dk, Dv) fp32;
//   conv    the last 3 raw q, k, v rows.
// forward_cached on an empty cache with T > 1 (a prompt) runs the chunked forward and fills the
// cache from it; otherwise it steps token by token (the recurrent form).
class HybridMixer final : public Mixer {
 public:
  HybridMixer(const MixerOptions& options, const AttentionShape& shape, uint64_t seed);

  std::string kind() const override { return to_string(options_.kind); }
  void forward(const MixerInputs& in, float* y) const override;
  void backward(const MixerInputs& in, const float* dy, const MixerInputGrads& grads) override;
  std::unique_ptr<MixerCache> make_cache() const override;
  void forward_cached(MixerCache& cache, const MixerInputs& in, float* y) const override;
  std::vector<Parameter*> parameters() override;

  const MixerOptions& options() const { return options_; }
  const AttentionShape& shape() const { return shape_; }
  HybridTensors<const float*> tensors() const;  // views of the parameter values

 private:
  // forward_cached on an empty cache with more than one token: the chunked form over the prompt.
  void prefill(MixerCache& cache, const MixerInputs& in, float* y) const;

  MixerOptions options_;
  AttentionShape shape_;
  std::vector<Parameter> parameters_;
};

}  // namespace golinear::mixers
