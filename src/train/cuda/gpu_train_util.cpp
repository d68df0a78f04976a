#include "train/cuda/gpu_train_util.h"

#include <algorithm>

#include "mixers/cuda/gpu_hybrid_layer.h"
#include "mixers/hybrid_mixer.h"

namespace golinear::train::cuda {

CublasHandle::~CublasHandle() {
  if (handle_) cublasDestroy(handle_);
}

Status CublasHandle::create() {
  if (cublasCreate(&handle_) != CUBLAS_STATUS_SUCCESS) return make_error("cublasCreate failed");
  return ok_status();
}

Result<std::vector<FlatPiece>> flat_pieces(MixerStack& students, const std::vector<int>& trained,
                                           const std::vector<long>& block_offset,
                                           const std::string& what) {
  std::vector<FlatPiece> pieces;
  long cpu = 0;
  for (size_t l = 0; l < students.size(); ++l) {
    const auto it = std::find(trained.begin(), trained.end(), (int)l);
    const std::vector<mixers::Parameter*> params = students[l]->parameters();
    if (it == trained.end()) {
      for (const mixers::Parameter* p : params) cpu += (long)p->value.size();
      continue;
    }
    const long block = block_offset[it - trained.begin()];
    auto* hybrid = dynamic_cast<mixers::HybridMixer*>(students[l].get());
    if (!hybrid) return make_error(what, ": layer ", l, " is not a hybrid mixer");
    const auto layout = mixers::cuda::gpu_hybrid_layout(hybrid->shape());
    for (const mixers::Parameter* p : params) {
      const mixers::cuda::GpuParamSlot* slot = nullptr;
      for (const auto& s : layout)
        if (s.name == p->name) slot = &s;
      if (!slot || slot->count != (long)p->value.size())
        return make_error(what, ": layer ", l, " parameter '", p->name, "' has no place in the GPU layout");
      pieces.push_back({cpu, block + slot->offset, slot->count});
      cpu += slot->count;
    }
  }
  return pieces;
}

}  // namespace golinear::train::cuda
