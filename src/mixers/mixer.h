// The token mixer of one layer: what sits between the frozen q/k/v projections and the frozen
// o_proj. The teacher's softmax attention is one (mixers/softmax_mixer.h); the linear
// replacements of DESIGN.md §3 are the others. The model owns one Mixer per layer.
//
// Layout of every activation: row-major, time first. Dimension letters: T time, C hidden,
// H query heads, G kv heads, D head dim.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace golinear::mixers {

struct AttentionShape {
  int C = 0;  // hidden size (width of x)
  int H = 0;  // query heads
  int G = 0;  // kv heads, divides H
  int D = 0;  // head dim
};

// What the frozen backbone hands a mixer for T consecutive tokens of one sequence.
struct MixerInputs {
  int T = 0;
  long pos0 = 0;                    // absolute position of the first token
  const float* x = nullptr;         // (T, C) attention-block input after input_layernorm
  const float* q = nullptr;         // (T, H, D) after q_proj (+bias, +q_norm), before RoPE
  const float* k = nullptr;         // (T, G, D) after k_proj (+bias, +k_norm), before RoPE
  const float* v = nullptr;         // (T, G, D) after v_proj (+bias)
  const float* inv_freq = nullptr;  // (D/2) RoPE inverse frequencies of the model
};

// Gradients with respect to the inputs (accumulated, +=); any pointer may be null.
struct MixerInputGrads {
  float* dx = nullptr;  // (T, C)
  float* dq = nullptr;  // (T, H, D)
  float* dk = nullptr;  // (T, G, D)
  float* dv = nullptr;  // (T, G, D)
};

// A trainable tensor owned by a mixer: fp32 values and a gradient of the same shape.
struct Parameter {
  std::string name;            // e.g. "w_a"; the checkpoint prefixes it with the layer
  std::vector<int64_t> shape;
  std::vector<float> value;
  std::vector<float> grad;
};

// Per-sequence decode state. Its size must not grow with the number of tokens processed,
// except for the softmax mixer's KV cache.
class MixerCache {
 public:
  virtual ~MixerCache() = default;
  virtual size_t bytes() const = 0;  // memory held now
  // A deep copy: the copy and the original then continue independently (scoring several
  // continuations of one shared prefix). The copy holds as many bytes() as the original.
  virtual std::unique_ptr<MixerCache> clone() const = 0;
  long position = 0;                 // tokens processed so far
};

// A copy of `v` holding the same capacity (so that bytes() of a cloned cache is the original's).
template <class T>
std::vector<T> copy_with_capacity(const std::vector<T>& v) {
  std::vector<T> out;
  out.reserve(v.capacity());
  out.assign(v.begin(), v.end());
  return out;
}

class Mixer {
 public:
  virtual ~Mixer() = default;
  virtual std::string kind() const = 0;  // "softmax", "gdn", "gla", "kgla", "hedgehog", "none"

  // Whole sequence from position 0 (in.pos0 == 0): y (T, H, D), the input of o_proj.
  virtual void forward(const MixerInputs& in, float* y) const = 0;

  // Gradients of Σ dy·y: parameter gradients accumulate into parameters()[i].grad, input
  // gradients into `grads`. Recomputes what it needs from `in`.
  virtual void backward(const MixerInputs& in, const float* dy, const MixerInputGrads& grads) = 0;

  // Appends in.T tokens (in.pos0 == cache.position) to the cache and writes their outputs;
  // must agree with forward() over the concatenated sequence.
  virtual std::unique_ptr<MixerCache> make_cache() const = 0;
  virtual void forward_cached(MixerCache& cache, const MixerInputs& in, float* y) const = 0;

  virtual std::vector<Parameter*> parameters() { return {}; }
};

}  // namespace golinear::mixers
