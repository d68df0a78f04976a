#include "runtime/cpu_sequence_slots.h"

#include <cblas.h>  // openblas_set_num_threads
#include <omp.h>

namespace golinear::runtime {

namespace {

class CpuSnapshot final : public StateSnapshot {
 public:
  explicit CpuSnapshot(SequenceCache cache) : cache_(std::move(cache)) {}
  size_t bytes() const override { return cache_.bytes(); }
  long position() const override { return cache_.position; }
  const SequenceCache& cache() const { return cache_; }

 private:
  SequenceCache cache_;
};

}  // namespace

CpuSequenceSlots::CpuSequenceSlots(const Model& model, int slots, int threads)
    : model_(model), threads_(threads) {
  caches_.reserve(slots);
  for (int i = 0; i < slots; ++i) caches_.push_back(model_new_cache(model));
}

// OpenMP's thread count is a setting of the calling thread (the scheduler's), OpenBLAS's global.
void CpuSequenceSlots::set_threads() const {
  if (threads_ <= 0) return;
  omp_set_num_threads(threads_);
  if (openblas_get_num_threads() != threads_) openblas_set_num_threads(threads_);
}

Status CpuSequenceSlots::check_slot(int slot) const {
  if (slot < 0 || slot >= (int)caches_.size())
    return make_error("slot ", slot, " does not exist (", caches_.size(), " slots)");
  return ok_status();
}

Status CpuSequenceSlots::reset(int slot) {
  GL_TRY(check_slot(slot));
  caches_[slot] = model_new_cache(model_);
  return ok_status();
}

Status CpuSequenceSlots::prefill(int slot, const int32_t* ids, int T, float* last_logits) {
  GL_TRY(check_slot(slot));
  set_threads();
  if (T < 1) return make_error("prefill of slot ", slot, ": no tokens");
  model_forward_cached(model_, caches_[slot], ids, T, last_logits, /*last_only=*/true);
  return ok_status();
}

Status CpuSequenceSlots::decode(const int* slots, const int32_t* ids, int B, float* logits) {
  set_threads();
  std::vector<SequenceCache*> caches(B);
  for (int b = 0; b < B; ++b) {
    GL_TRY(check_slot(slots[b]));
    caches[b] = &caches_[slots[b]];
  }
  model_decode_batch(model_, caches.data(), ids, B, logits);
  return ok_status();
}

size_t CpuSequenceSlots::slot_bytes(int slot) const {
  return slot >= 0 && slot < (int)caches_.size() ? caches_[slot].bytes() : 0;
}

std::shared_ptr<const StateSnapshot> CpuSequenceSlots::snapshot(int slot) const {
  if (!check_slot(slot).ok()) return nullptr;
  return std::make_shared<CpuSnapshot>(caches_[slot].clone());
}

Status CpuSequenceSlots::restore(int slot, const StateSnapshot& snapshot) {
  GL_TRY(check_slot(slot));
  const auto* cpu = dynamic_cast<const CpuSnapshot*>(&snapshot);
  if (!cpu) return make_error("restore of slot ", slot, ": not a CPU snapshot");
  caches_[slot] = cpu->cache().clone();
  return ok_status();
}

}  // namespace golinear::runtime
