// AdamW with decoupled weight decay, a linear-warmup + cosine learning-rate schedule, and
// clipping by the global gradient norm. Only the parameters handed to it are ever written.
#pragma once

#include <vector>

#include "mixers/mixer.h"

namespace golinear::train {

struct AdamWOptions {
  float lr = 3e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  float clip_norm = 1.0f;  // ≤ 0: no clipping
};

// lr at `step` (0-based) of `total`: linear warmup over `warmup` steps, then cosine to min_ratio·lr.
float learning_rate_at(long step, long total, long warmup, float lr, float min_ratio = 0.1f);

class AdamW {
 public:
  AdamW(std::vector<mixers::Parameter*> parameters, AdamWOptions options);
  // Clips, updates every parameter from its .grad with learning rate `lr`, zeroes the grads.
  // Returns the gradient norm before clipping.
  float step(float lr);
  void zero_grad();
  float grad_norm() const;

  // Moments, for resuming: m and v of every parameter, flattened in parameter order.
  std::vector<float>& first_moments() { return m_; }
  std::vector<float>& second_moments() { return v_; }
  long& steps_taken() { return t_; }

 private:
  std::vector<mixers::Parameter*> parameters_;
  AdamWOptions options_;
  std::vector<float> m_, v_;
  long t_ = 0;
};

}  // namespace golinear::train
