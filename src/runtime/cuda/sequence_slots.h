// Sequence slots on the GPU (runtime/sequence_slots.h's interface, the server's --device cuda
// backend): one model::cuda::GpuSequenceCache per slot, created for `max_context` tokens (the
// constant-size hybrid caches, and a KV cache of max_context rows per softmax layer). A prompt
// into an empty slot is one forward (gpu_prefill; the prompts of several empty slots one packed
// forward, gpu_prefill_batch); further prompt chunks go through the decode step token by token. The decode step of B slots is one batched step (gpu_decode_batch: products
// of B rows, the hybrid layers' fused step over the B caches, a replayed CUDA graph per batch
// size when every layer is hybrid). Snapshots (the prompt cache, slot save/restore) are host
// copies of a slot's state (GpuSequenceCache::save_async / restore). When every layer is hybrid
// (a state of one size) a snapshot is a pinned host buffer of a pool the slots own (shared with
// the snapshots, which give their buffer back when destroyed, so a snapshot may outlive the
// slots), filled by a copy on the pool's own stream that overlaps the next steps of the model's
// stream; its bytes are read (restore) once that copy completed. A model with softmax layers
// (a state whose size grows with the position) copies into a std::vector, synchronously; so
// does a snapshot for which no pinned memory could be had.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/cuda/gpu_model.h"
#include "runtime/sequence_slots.h"

namespace golinear::runtime::cuda {

class SnapshotPool;

// The pinned buffers of the snapshots: how many were allocated (cudaMallocHost calls), how many
// lie idle for the next snapshot and their bytes.
struct SnapshotPoolStats {
  uint64_t allocations = 0;
  size_t idle_buffers = 0, idle_bytes = 0;
};

class GpuSequenceSlots final : public SequenceSlots {
 public:
  // `model` must outlive the slots. idle_snapshot_buffers: how many pinned buffers given back by
  // destroyed snapshots are kept for the next ones (the rest are freed).
  static Result<std::unique_ptr<GpuSequenceSlots>> create(golinear::model::cuda::GpuModel& model,
                                                          int slots, long max_context,
                                                          int idle_snapshot_buffers = 4);
  ~GpuSequenceSlots() override;

  int slots() const override { return (int)caches_.size(); }
  int vocab_size() const override { return model_.config().vocab_size; }
  const char* device() const override { return "cuda"; }
  bool batched_kernels() const override { return true; }
  bool chunked_prefill() const override { return false; }
  Status reset(int slot) override;
  Status prefill(int slot, const int32_t* ids, int T, float* last_logits) override;
  std::vector<Status> prefill_batch(const std::vector<PrefillChunk>& chunks) override;
  Status decode(const int* slots, const int32_t* ids, int B, float* logits) override;
  Status decode_greedy(const int* slots, const int32_t* ids, int B, int32_t* next) override;
  size_t slot_bytes(int slot) const override;
  bool can_snapshot() const override { return true; }
  std::shared_ptr<const StateSnapshot> snapshot(int slot) const override;
  Status restore(int slot, const StateSnapshot& snapshot) override;
  // Null stats when snapshots are copied without the pool (a model with softmax layers).
  SnapshotPoolStats snapshot_pool_stats() const;

 private:
  explicit GpuSequenceSlots(golinear::model::cuda::GpuModel& model) : model_(model) {}
  Status check_slot(int slot) const;
  // The caches of `slots` after checking each has room for one more token.
  Result<std::vector<golinear::model::cuda::GpuSequenceCache*>> step_caches(const int* slots, int B) const;
  golinear::model::cuda::GpuModel& model_;
  std::vector<std::unique_ptr<golinear::model::cuda::GpuSequenceCache>> caches_;
  std::shared_ptr<SnapshotPool> pool_;  // null: snapshots into std::vector (softmax layers)
};

}  // namespace golinear::runtime::cuda
