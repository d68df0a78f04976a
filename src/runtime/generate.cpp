#include "runtime/generate.h"

#include <algorithm>
#include <memory>

namespace golinear::runtime {

NewSequence cpu_sequences(const Model& model) {
  return [&model](long) -> Result<SequenceStep> {
    auto cache = std::make_shared<SequenceCache>(model_new_cache(model));
    return SequenceStep([&model, cache](const int32_t* ids, int T, float* last_logits) {
      model_forward_cached(model, *cache, ids, T, last_logits, /*last_only=*/true);
      return ok_status();
    });
  };
}

Result<std::vector<int32_t>> generate(const NewSequence& new_sequence, int vocab_size,
                                      const std::vector<int32_t>& prompt,
                                      const GenerateOptions& options,
                                      const std::function<void(int32_t)>& on_token) {
  std::vector<int32_t> out;
  if (prompt.empty() || options.max_new_tokens <= 0) return out;
  GL_ASSIGN_OR_RETURN(SequenceStep step,
                      new_sequence((long)prompt.size() + options.max_new_tokens));
  Sampler sampler(options.sampler);
  std::vector<float> logits(vocab_size);
  GL_TRY(step(prompt.data(), (int)prompt.size(), logits.data()));
  for (int i = 0; i < options.max_new_tokens; ++i) {
    int32_t next = sampler.sample(logits.data(), vocab_size);
    out.push_back(next);
    if (on_token) on_token(next);
    if (std::find(options.stop_ids.begin(), options.stop_ids.end(), next) != options.stop_ids.end())
      break;
    if (i + 1 < options.max_new_tokens) GL_TRY(step(&next, 1, logits.data()));
  }
  return out;
}

std::vector<int32_t> generate(const Model& model, const std::vector<int32_t>& prompt,
                              const GenerateOptions& options,
                              const std::function<void(int32_t)>& on_token) {
  // The CPU sequence cannot fail.
  return generate(cpu_sequences(model), model.config.vocab_size, prompt, options, on_token).value();
}

}  // namespace golinear::runtime
