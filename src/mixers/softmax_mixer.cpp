#include "mixers/softmax_mixer.h"

#include <vector>

#include "kernels/cpu/rope.h"

namespace golinear::mixers {

namespace cpu = kernels::cpu;

namespace {

// The ordinary KV cache: RoPE'd keys and values of every token seen, (T, G, D) each.
class SoftmaxCache final : public MixerCache {
 public:
  size_t bytes() const override { return (k.capacity() + v.capacity()) * sizeof(float); }
  std::unique_ptr<MixerCache> clone() const override {
    auto c = std::make_unique<SoftmaxCache>();
    c->k = copy_with_capacity(k);
    c->v = copy_with_capacity(v);
    c->position = position;
    return c;
  }
  std::vector<float> k, v;
};

}  // namespace

void SoftmaxMixer::forward(const MixerInputs& in, float* y) const {
  const auto [C, H, G, D] = shape_;
  std::vector<float> q(in.q, in.q + (long)in.T * H * D), k(in.k, in.k + (long)in.T * G * D);
  cpu::rope_forward(q.data(), in.inv_freq, in.T, H, D, in.pos0);
  cpu::rope_forward(k.data(), in.inv_freq, in.T, G, D, in.pos0);
  cpu::attention_forward(y, q.data(), k.data(), in.v, in.T, in.T, 0, H, G, D, mask_);
}

void SoftmaxMixer::backward(const MixerInputs& in, const float* dy, const MixerInputGrads& grads) {
  const auto [C, H, G, D] = shape_;
  const long nq = (long)in.T * H * D, nk = (long)in.T * G * D;
  std::vector<float> q(in.q, in.q + nq), k(in.k, in.k + nk);
  cpu::rope_forward(q.data(), in.inv_freq, in.T, H, D, in.pos0);
  cpu::rope_forward(k.data(), in.inv_freq, in.T, G, D, in.pos0);
  std::vector<float> dq(nq, 0.0f), dk(nk, 0.0f), dv(nk, 0.0f);
  cpu::attention_backward(dq.data(), dk.data(), dv.data(), dy, q.data(), k.data(), in.v, in.T, H,
                          G, D, mask_);
  cpu::rope_backward(dq.data(), in.inv_freq, in.T, H, D, in.pos0);
  cpu::rope_backward(dk.data(), in.inv_freq, in.T, G, D, in.pos0);
  if (grads.dq)
    for (long i = 0; i < nq; ++i) grads.dq[i] += dq[i];
  if (grads.dk)
    for (long i = 0; i < nk; ++i) grads.dk[i] += dk[i];
  if (grads.dv)
    for (long i = 0; i < nk; ++i) grads.dv[i] += dv[i];
}

std::unique_ptr<MixerCache> SoftmaxMixer::make_cache() const {
  return std::make_unique<SoftmaxCache>();
}

void SoftmaxMixer::forward_cached(MixerCache& base, const MixerInputs& in, float* y) const {
  auto& cache = static_cast<SoftmaxCache&>(base);
  const auto [C, H, G, D] = shape_;
  const long nk = (long)in.T * G * D;
  std::vector<float> q(in.q, in.q + (long)in.T * H * D);
  cpu::rope_forward(q.data(), in.inv_freq, in.T, H, D, in.pos0);
  const size_t old = cache.k.size();
  cache.k.insert(cache.k.end(), in.k, in.k + nk);
  cache.v.insert(cache.v.end(), in.v, in.v + nk);
  cpu::rope_forward(cache.k.data() + old, in.inv_freq, in.T, G, D, in.pos0);
  const int Tk = (int)(cache.k.size() / ((size_t)G * D));
  cpu::attention_forward(y, q.data(), cache.k.data(), cache.v.data(), in.T, Tk, in.pos0, H, G, D,
                         mask_);
  cache.position += in.T;
}

}  // namespace golinear::mixers
