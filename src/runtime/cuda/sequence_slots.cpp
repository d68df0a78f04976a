#include "runtime/cuda/sequence_slots.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace golinear::runtime::cuda {

using golinear::model::cuda::GpuSequenceCache;

Result<std::unique_ptr<GpuSequenceSlots>> GpuSequenceSlots::create(
    golinear::model::cuda::GpuModel& model, int slots, long max_context) {
  std::unique_ptr<GpuSequenceSlots> out(new GpuSequenceSlots(model));
  for (int i = 0; i < slots; ++i) {
    auto cache = GpuSequenceCache::create(model, max_context);
    if (!cache.ok()) return make_error("slot ", i, " of ", slots, ": ", cache.error());
    out->caches_.push_back(std::move(*cache));
  }
  return out;
}

Status GpuSequenceSlots::check_slot(int slot) const {
  if (slot < 0 || slot >= (int)caches_.size())
    return make_error("slot ", slot, " does not exist (", caches_.size(), " slots)");
  return ok_status();
}

Status GpuSequenceSlots::reset(int slot) {
  GL_TRY(check_slot(slot));
  return caches_[slot]->reset();
}

Status GpuSequenceSlots::prefill(int slot, const int32_t* ids, int T, float* last_logits) {
  GL_TRY(check_slot(slot));
  GpuSequenceCache& cache = *caches_[slot];
  if (cache.position() + T > cache.max_context())
    return make_error("slot ", slot, ": ", cache.position(), " + ", T,
                      " tokens exceed its cache of ", cache.max_context());
  return golinear::model::cuda::gpu_prefill(model_, cache, ids, T, last_logits);
}

std::vector<Status> GpuSequenceSlots::prefill_batch(const std::vector<PrefillChunk>& chunks) {
  std::vector<Status> out(chunks.size(), ok_status());
  // Prompts of ≥ 2 tokens into distinct empty slots go in one packed forward; the rest alone.
  std::vector<size_t> packed;
  std::vector<bool> taken(caches_.size(), false);
  for (size_t i = 0; i < chunks.size(); ++i) {
    const PrefillChunk& c = chunks[i];
    if (!check_slot(c.slot).ok() || taken[c.slot] || c.T < 2 ||
        caches_[c.slot]->position() != 0 || c.T > caches_[c.slot]->max_context())
      continue;
    taken[c.slot] = true;
    packed.push_back(i);
  }
  if (packed.size() > 1) {
    std::vector<GpuSequenceCache*> caches;
    std::vector<const int32_t*> ids;
    std::vector<int> lengths;
    std::vector<float*> logits;
    for (size_t i : packed) {
      caches.push_back(caches_[chunks[i].slot].get());
      ids.push_back(chunks[i].ids);
      lengths.push_back(chunks[i].T);
      logits.push_back(chunks[i].last_logits);
    }
    Status status = golinear::model::cuda::gpu_prefill_batch(
        model_, caches.data(), ids.data(), lengths.data(), (int)packed.size(), logits.data());
    for (size_t i : packed) out[i] = status;
  } else {
    packed.clear();
  }
  // The chunks not packed (`packed` is ascending) one after the other.
  for (size_t i = 0; i < chunks.size(); ++i)
    if (!std::binary_search(packed.begin(), packed.end(), i))
      out[i] = prefill(chunks[i].slot, chunks[i].ids, chunks[i].T, chunks[i].last_logits);
  return out;
}

Result<std::vector<golinear::model::cuda::GpuSequenceCache*>> GpuSequenceSlots::step_caches(
    const int* slots, int B) const {
  std::vector<GpuSequenceCache*> batch(B);
  for (int b = 0; b < B; ++b) {
    GL_TRY(check_slot(slots[b]));
    GpuSequenceCache& cache = *caches_[slots[b]];
    if (cache.position() + 1 > cache.max_context())
      return make_error("slot ", slots[b], ": its cache of ", cache.max_context(), " is full");
    batch[b] = &cache;
  }
  return batch;
}

Status GpuSequenceSlots::decode(const int* slots, const int32_t* ids, int B, float* logits) {
  GL_ASSIGN_OR_RETURN(auto batch, step_caches(slots, B));
  return golinear::model::cuda::gpu_decode_batch(model_, batch.data(), ids, B, logits, nullptr);
}

Status GpuSequenceSlots::decode_greedy(const int* slots, const int32_t* ids, int B, int32_t* next) {
  GL_ASSIGN_OR_RETURN(auto batch, step_caches(slots, B));
  return golinear::model::cuda::gpu_decode_batch(model_, batch.data(), ids, B, nullptr, next);
}

namespace {

// A slot's state on the host (GpuSequenceCache::save's bytes).
class GpuStateSnapshot final : public StateSnapshot {
 public:
  GpuStateSnapshot(std::vector<char> bytes, long position)
      : bytes_(std::move(bytes)), position_(position) {}
  size_t bytes() const override { return bytes_.size(); }
  long position() const override { return position_; }
  const std::vector<char>& data() const { return bytes_; }

 private:
  std::vector<char> bytes_;
  long position_;
};

}  // namespace

std::shared_ptr<const StateSnapshot> GpuSequenceSlots::snapshot(int slot) const {
  if (!check_slot(slot).ok()) return nullptr;
  std::vector<char> bytes;
  if (!caches_[slot]->save(&bytes).ok()) return nullptr;
  return std::make_shared<GpuStateSnapshot>(std::move(bytes), caches_[slot]->position());
}

Status GpuSequenceSlots::restore(int slot, const StateSnapshot& snapshot) {
  GL_TRY(check_slot(slot));
  const auto* gpu = dynamic_cast<const GpuStateSnapshot*>(&snapshot);
  if (!gpu) return make_error("slot ", slot, ": the snapshot is not a GPU state");
  return caches_[slot]->restore(gpu->data(), gpu->position());
}

size_t GpuSequenceSlots::slot_bytes(int slot) const {
  return slot >= 0 && slot < (int)caches_.size() ? caches_[slot]->bytes() : 0;
}

}  // namespace golinear::runtime::cuda
