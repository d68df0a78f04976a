#include "train/optimizer.h"

#include <algorithm>
#include <cmath>

namespace golinear::train {

float learning_rate_at(long step, long total, long warmup, float lr, float min_ratio) {
  if (warmup > 0 && step < warmup) return lr * (float)(step + 1) / (float)warmup;
  const long decay_steps = std::max(1L, total - warmup);
  const double progress = std::min(1.0, (double)(step - warmup) / (double)decay_steps);
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return (float)(lr * (min_ratio + (1.0 - min_ratio) * cosine));
}

AdamW::AdamW(std::vector<mixers::Parameter*> parameters, AdamWOptions options)
    : parameters_(std::move(parameters)), options_(options) {
  size_t n = 0;
  for (auto* p : parameters_) n += p->value.size();
  m_.assign(n, 0.0f);
  v_.assign(n, 0.0f);
}

float AdamW::grad_norm() const {
  double sum = 0.0;
  for (auto* p : parameters_)
    for (float g : p->grad) sum += (double)g * g;
  return (float)std::sqrt(sum);
}

void AdamW::zero_grad() {
  for (auto* p : parameters_) std::fill(p->grad.begin(), p->grad.end(), 0.0f);
}

float AdamW::step(float lr) {
  const float norm = grad_norm();
  const float clip = (options_.clip_norm > 0 && norm > options_.clip_norm && std::isfinite(norm))
                         ? options_.clip_norm / norm
                         : 1.0f;
  ++t_;
  const float bias1 = 1.0f - std::pow(options_.beta1, (float)t_);
  const float bias2 = 1.0f - std::pow(options_.beta2, (float)t_);
  size_t offset = 0;
  for (auto* p : parameters_) {
    for (size_t i = 0; i < p->value.size(); ++i, ++offset) {
      const float g = p->grad[i] * clip;
      m_[offset] = options_.beta1 * m_[offset] + (1 - options_.beta1) * g;
      v_[offset] = options_.beta2 * v_[offset] + (1 - options_.beta2) * g * g;
      const float update = (m_[offset] / bias1) / (std::sqrt(v_[offset] / bias2) + options_.eps);
      p->value[i] -= lr * (update + options_.weight_decay * p->value[i]);
    }
  }
  zero_grad();
  return norm;
}

}  // namespace golinear::train
