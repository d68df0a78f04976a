#include "mixers/mixer_factory.h"

#include "mixers/hybrid_mixer.h"

namespace golinear::mixers {

Result<MixerKind> mixer_kind_parse(const std::string& name) {
  if (name == "none") return MixerKind::none;
  if (name == "gdn") return MixerKind::gdn;
  if (name == "gla") return MixerKind::gla;
  if (name == "kgla") return MixerKind::kgla;
  if (name == "hedgehog") return MixerKind::hedgehog;
  return make_error("unknown mixer '", name, "' (expected one of: none, gdn, gla, kgla, hedgehog)");
}

Result<MixKind> mix_kind_parse(const std::string& name) {
  if (name == "gate") return MixKind::gate;
  if (name == "add") return MixKind::add;
  if (name == "scale") return MixKind::scale;
  if (name == "gate-lse") return MixKind::gate_lse;
  if (name == "split") return MixKind::split;
  return make_error("unknown mix '", name, "' (expected one of: gate, add, scale, gate-lse, split)");
}

std::string to_string(MixerKind kind) {
  switch (kind) {
    case MixerKind::none: return "none";
    case MixerKind::gdn: return "gdn";
    case MixerKind::gla: return "gla";
    case MixerKind::kgla: return "kgla";
    case MixerKind::hedgehog: return "hedgehog";
  }
  return "?";
}

std::string to_string(MixKind mix) {
  switch (mix) {
    case MixKind::gate: return "gate";
    case MixKind::add: return "add";
    case MixKind::scale: return "scale";
    case MixKind::gate_lse: return "gate-lse";
    case MixKind::split: return "split";
  }
  return "?";
}

Status mixer_options_validate(const MixerOptions& options) {
  if (options.sinks < 0) return make_error("mixer option sinks must be >= 0, got ", options.sinks);
  if (options.window < 0)
    return make_error("mixer option window must be >= 0, got ", options.window);
  if ((long)options.sinks + options.window > kMaxExactKeys)
    return make_error("mixer options sinks + window = ", (long)options.sinks + options.window,
                      " exceed the limit of ", kMaxExactKeys, " exact keys");
  if (options.kind == MixerKind::none && options.sinks + options.window == 0)
    return make_error("mixer 'none' needs sinks + window > 0 (it has no linear branch)");
  return ok_status();
}

Result<std::unique_ptr<Mixer>> mixer_create(const MixerOptions& options,
                                            const AttentionShape& shape, uint64_t seed) {
  GL_TRY(mixer_options_validate(options));
  const auto [C, H, G, D] = shape;
  if (C <= 0 || H <= 0 || G <= 0 || D <= 0)
    return make_error("attention shape must be positive, got C=", C, " H=", H, " G=", G, " D=", D);
  if (H % G != 0)
    return make_error("attention shape: kv heads G=", G, " must divide query heads H=", H);
  if (D % 2 != 0) return make_error("attention shape: head dim D=", D, " must be even for RoPE");
  return std::unique_ptr<Mixer>(std::make_unique<HybridMixer>(options, shape, seed));
}

}  // namespace golinear::mixers
