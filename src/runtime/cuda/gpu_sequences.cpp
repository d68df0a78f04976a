#include "runtime/cuda/gpu_sequences.h"

#include <memory>

namespace golinear::runtime::cuda {

runtime::NewSequence gpu_sequences(golinear::model::cuda::GpuModel& model) {
  return [&model](long max_context) -> Result<runtime::SequenceStep> {
    GL_ASSIGN_OR_RETURN(std::shared_ptr<golinear::model::cuda::GpuSequenceCache> cache,
                        golinear::model::cuda::GpuSequenceCache::create(model, max_context));
    return runtime::SequenceStep(
        [&model, cache](const int32_t* ids, int T, float* last_logits) -> Status {
          if (cache->position() + T > cache->max_context())
            return make_error("gpu sequence: ", cache->position(), " + ", T,
                              " tokens exceed its cache of ", cache->max_context());
          if (T == 1 && cache->position() > 0)
            return golinear::model::cuda::gpu_decode(model, *cache, ids[0], last_logits, nullptr);
          return golinear::model::cuda::gpu_prefill(model, *cache, ids, T, last_logits);
        });
  };
}

}  // namespace golinear::runtime::cuda
