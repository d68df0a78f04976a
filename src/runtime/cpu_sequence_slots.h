// Sequence slots on the CPU (the server's CPU backend): one model::SequenceCache per slot (every
// layer's mixer cache: the constant-size hybrid state, or the KV cache of a softmax layer, which
// grows with the tokens). The decode step is model_decode_batch: the B sequences go through the
// layers together in groups of kDecodeBatchRows rows (each weight matrix read once per group),
// with each sequence's own mixer step; every row's logits are those of the sequence alone.
#pragma once

#include <vector>

#include "model/transformer.h"
#include "runtime/sequence_slots.h"

namespace golinear::runtime {

class CpuSequenceSlots final : public SequenceSlots {
 public:
  // `model` must outlive the backend.
  // threads > 0: the kernels of this backend's calls run on that many threads (OpenMP and
  // OpenBLAS); 0 leaves the libraries' defaults.
  CpuSequenceSlots(const Model& model, int slots, int threads = 0);

  int slots() const override { return (int)caches_.size(); }
  int vocab_size() const override { return model_.config.vocab_size; }
  const char* device() const override { return "cpu"; }
  bool batched_kernels() const override { return true; }
  Status reset(int slot) override;
  Status prefill(int slot, const int32_t* ids, int T, float* last_logits) override;
  Status decode(const int* slots, const int32_t* ids, int B, float* logits) override;
  size_t slot_bytes(int slot) const override;

  // A snapshot is a deep copy of the slot's SequenceCache (SequenceCache::clone).
  bool can_snapshot() const override { return true; }
  std::shared_ptr<const StateSnapshot> snapshot(int slot) const override;
  Status restore(int slot, const StateSnapshot& snapshot) override;

 private:
  Status check_slot(int slot) const;
  void set_threads() const;
  const Model& model_;
  int threads_ = 0;
  std::vector<SequenceCache> caches_;
};

}  // namespace golinear::runtime
