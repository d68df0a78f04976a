// The teacher: causal softmax attention with RoPE, optionally restricted to sinks + window
// (that restriction alone is the `--mixer none` baseline of DESIGN.md §3).
#pragma once

#include "kernels/cpu/attention.h"
#include "mixers/mixer.h"

namespace golinear::mixers {

class SoftmaxMixer final : public Mixer {
 public:
  SoftmaxMixer(AttentionShape shape, kernels::cpu::AttentionMask mask = {})
      : shape_(shape), mask_(mask) {}
  std::string kind() const override { return mask_.window < 0 ? "softmax" : "none"; }
  void forward(const MixerInputs& in, float* y) const override;
  void backward(const MixerInputs& in, const float* dy, const MixerInputGrads& grads) override;
  std::unique_ptr<MixerCache> make_cache() const override;
  void forward_cached(MixerCache& cache, const MixerInputs& in, float* y) const override;

 private:
  AttentionShape shape_;
  kernels::cpu::AttentionMask mask_;
};

}  // namespace golinear::mixers
