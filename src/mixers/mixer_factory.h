// Choosing and building a layer's mixer: the options of DESIGN.md §3 (state kind, mixing,
// sinks, window, short conv, RoPE on the linear branch), their parsing and validation, and the
// factory that returns a Mixer with freshly initialised parameters.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/result.h"
#include "mixers/mixer.h"

namespace golinear::mixers {

// The state update of the linear branch; `none` keeps only the exact branch (sinks + window).
enum class MixerKind { none, gdn, gla, kgla, hedgehog };
// How the exact and linear branches combine (DESIGN.md §3.4). gate_lse ("gate-lse") is gate with
// the exact branch's log-sum-exp in the gate's logit; split is the softmax split itself: the gate
// logit log n_far(t) + w_λ·x + b_λ − c·lse, so λ = 0 (the exact branch alone, exactly) while no
// token has left the exact set (see mixers/hybrid_mixer.h).
enum class MixKind { gate, add, scale, gate_lse, split };

struct MixerOptions {
  MixerKind kind = MixerKind::gdn;
  MixKind mix = MixKind::split;  // the default recipe (docs/RESULTS.md §2c)
  int sinks = 8;              // s: the first s tokens are always attended exactly
  int window = 56;            // w: the last w tokens (the current one included) are attended exactly
  bool conv = true;           // short causal depthwise conv (width 4) on q, k, v
  bool linear_rope = false;   // RoPE on q̃, k̃ before the unit norm of the linear branch
};

// Upper bound on sinks + window: the exact branch is meant to be short (default 64 keys).
inline constexpr int kMaxExactKeys = 4096;

Result<MixerKind> mixer_kind_parse(const std::string& name);  // "none", "gdn", "gla", "kgla", "hedgehog"
Result<MixKind> mix_kind_parse(const std::string& name);  // "gate", "add", "scale", "gate-lse"
std::string to_string(MixerKind kind);
std::string to_string(MixKind mix);

// Rejects negative sinks or window, sinks + window > kMaxExactKeys, and `none` with no exact keys.
Status mixer_options_validate(const MixerOptions& options);

// A hybrid mixer (any kind, `none` included) for one layer of the given shape, parameters
// initialised deterministically from `seed` (see mixers/hybrid_mixer.h for the initialisation).
Result<std::unique_ptr<Mixer>> mixer_create(const MixerOptions& options,
                                            const AttentionShape& shape, uint64_t seed);

}  // namespace golinear::mixers
