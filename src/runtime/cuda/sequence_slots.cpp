#include "runtime/cuda/sequence_slots.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "kernels/cuda/device_resources.h"

namespace golinear::runtime::cuda {

using golinear::model::cuda::GpuSequenceCache;

// The snapshots' pinned host buffers and the stream of their copies, shared by the slots and
// every snapshot (the last owner frees it). A buffer given back is kept for the next snapshot of
// its exact size while fewer than max_idle lie idle, else freed; acquire allocates
// (cudaMallocHost) only when none of the size is idle (when that fails the snapshot falls back to
// pageable memory). Thread-safe (a snapshot may be destroyed
// on any thread).
class SnapshotPool {
 public:
  explicit SnapshotPool(size_t max_idle) : max_idle_(max_idle) {}
  SnapshotPool(const SnapshotPool&) = delete;
  SnapshotPool& operator=(const SnapshotPool&) = delete;
  ~SnapshotPool() {
    for (const auto& [n, buffer] : idle_) cudaFreeHost(buffer);  // nothing to report here
  }
  Status init() { return stream_.create(false); }
  cudaStream_t stream() const { return stream_.get(); }

  Result<char*> acquire(size_t n) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = idle_.find(n); it != idle_.end()) {
        char* buffer = it->second;
        idle_.erase(it);
        idle_bytes_ -= n;
        return buffer;
      }
    }
    void* buffer = nullptr;
    if (const cudaError_t e = cudaMallocHost(&buffer, n); e != cudaSuccess) {
      (void)cudaGetLastError();  // no error left behind for the next launch check
      return make_error("pinned host memory of ", n, " bytes: ", cudaGetErrorString(e));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    ++allocations_;
    return static_cast<char*>(buffer);
  }
  // `buffer` (n bytes, of acquire) back, no copy writing it any more.
  void release(char* buffer, size_t n) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (idle_.size() < max_idle_) {
        idle_.emplace(n, buffer);
        idle_bytes_ += n;
        return;
      }
    }
    cudaFreeHost(buffer);
  }
  SnapshotPoolStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return {allocations_, idle_.size(), idle_bytes_};
  }

 private:
  kernels::cuda::CudaStream stream_;
  const size_t max_idle_;
  mutable std::mutex mutex_;
  std::multimap<size_t, char*> idle_;  // by size
  size_t idle_bytes_ = 0;
  uint64_t allocations_ = 0;
};

Result<std::unique_ptr<GpuSequenceSlots>> GpuSequenceSlots::create(
    golinear::model::cuda::GpuModel& model, int slots, long max_context,
    int idle_snapshot_buffers) {
  std::unique_ptr<GpuSequenceSlots> out(new GpuSequenceSlots(model));
  for (int i = 0; i < slots; ++i) {
    auto cache = GpuSequenceCache::create(model, max_context);
    if (!cache.ok()) return make_error("slot ", i, " of ", slots, ": ", cache.error());
    out->caches_.push_back(std::move(*cache));
  }
  if (model.has_hybrid_layers() && !model.has_softmax_layers()) {
    out->pool_ = std::make_shared<SnapshotPool>((size_t)std::max(0, idle_snapshot_buffers));
    GL_TRY(out->pool_->init());
  }
  return out;
}

GpuSequenceSlots::~GpuSequenceSlots() = default;

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

// A slot's state on the host (GpuSequenceCache::save's layout): a pinned buffer of the pool that
// a copy on the pool's stream fills until `copied` (save_async), or a std::vector already
// written (save). Owns the buffer and the event: its destructor waits for the copy before giving
// the buffer back.
class GpuStateSnapshot final : public StateSnapshot {
 public:
  GpuStateSnapshot(std::vector<char> bytes, long position)
      : vector_(std::move(bytes)), size_(vector_.size()), position_(position) {}
  GpuStateSnapshot(std::shared_ptr<SnapshotPool> pool, char* buffer, size_t n, long position)
      : pool_(std::move(pool)), buffer_(buffer), size_(n), position_(position) {}
  GpuStateSnapshot(const GpuStateSnapshot&) = delete;
  GpuStateSnapshot& operator=(const GpuStateSnapshot&) = delete;
  ~GpuStateSnapshot() override {
    if (!pool_) return;
    if (copied_.get()) cudaEventSynchronize(copied_.get());  // the copy may still be writing
    pool_->release(buffer_, size_);
  }
  // The event the copy into the buffer records (pool snapshots).
  Status create_event() { return copied_.create(); }
  cudaEvent_t copied() const { return copied_.get(); }
  size_t bytes() const override { return size_; }
  long position() const override { return position_; }
  // The bytes, once written (waits for the copy).
  Result<std::span<const char>> data() const {
    if (pool_) GL_CUDA_CHECK(cudaEventSynchronize(copied_.get()));
    return std::span<const char>(pool_ ? buffer_ : vector_.data(), size_);
  }

 private:
  std::vector<char> vector_;
  std::shared_ptr<SnapshotPool> pool_;
  char* buffer_ = nullptr;
  size_t size_ = 0;
  kernels::cuda::CudaEvent copied_;
  long position_ = 0;
};

}  // namespace

std::shared_ptr<const StateSnapshot> GpuSequenceSlots::snapshot(int slot) const {
  if (!check_slot(slot).ok()) return nullptr;
  GpuSequenceCache& cache = *caches_[slot];
  const size_t n = cache.state_bytes(cache.position());
  Result<char*> buffer = pool_ ? pool_->acquire(n) : make_error("no pool");
  if (buffer.ok()) {
    // From here the snapshot owns the buffer (given back when `out` goes).
    auto out = std::make_shared<GpuStateSnapshot>(pool_, *buffer, n, cache.position());
    if (out->create_event().ok()) {
      if (cache.save_async(*buffer, pool_->stream(), out->copied()).ok()) return out;
      cudaStreamSynchronize(pool_->stream());  // no copy left writing the buffer it gives back
      return nullptr;
    }
  }
  // Softmax layers, or no pinned memory (or event) to be had: a synchronous copy into pageable
  // memory.
  std::vector<char> bytes;
  if (!cache.save(&bytes).ok()) return nullptr;
  return std::make_shared<GpuStateSnapshot>(std::move(bytes), cache.position());
}

Status GpuSequenceSlots::restore(int slot, const StateSnapshot& snapshot) {
  GL_TRY(check_slot(slot));
  const auto* gpu = dynamic_cast<const GpuStateSnapshot*>(&snapshot);
  if (!gpu) return make_error("slot ", slot, ": the snapshot is not a GPU state");
  GL_ASSIGN_OR_RETURN(std::span<const char> bytes, gpu->data());
  return caches_[slot]->restore(bytes, gpu->position());
}

SnapshotPoolStats GpuSequenceSlots::snapshot_pool_stats() const {
  return pool_ ? pool_->stats() : SnapshotPoolStats{};
}

size_t GpuSequenceSlots::slot_bytes(int slot) const {
  return slot >= 0 && slot < (int)caches_.size() ? caches_[slot]->bytes() : 0;
}

}  // namespace golinear::runtime::cuda
