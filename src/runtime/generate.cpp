#include "runtime/generate.h"

#include <algorithm>

namespace golinear::runtime {

std::vector<int32_t> generate(const Model& model, const std::vector<int32_t>& prompt,
                              const GenerateOptions& options,
                              const std::function<void(int32_t)>& on_token) {
  const int V = model.config.vocab_size;
  SequenceCache cache = model_new_cache(model);
  Sampler sampler(options.sampler);
  std::vector<float> logits(V);
  std::vector<int32_t> out;
  if (prompt.empty() || options.max_new_tokens <= 0) return out;
  model_forward_cached(model, cache, prompt.data(), (int)prompt.size(), logits.data(), true);
  for (int step = 0; step < options.max_new_tokens; ++step) {
    int32_t next = sampler.sample(logits.data(), V);
    out.push_back(next);
    if (on_token) on_token(next);
    if (std::find(options.stop_ids.begin(), options.stop_ids.end(), next) != options.stop_ids.end())
      break;
    if (step + 1 < options.max_new_tokens)
      model_forward_cached(model, cache, &next, 1, logits.data(), true);
  }
  return out;
}

}  // namespace golinear::runtime
