// What the GPU trainers (attention transfer, end-to-end distillation) share: a cuBLAS handle
// owner and the map between the CPU AdamW's flat parameter order and the device buffer.
#pragma once

#include <cublas_v2.h>

#include <string>
#include <vector>

#include "common/result.h"
#include "model/transformer.h"

namespace golinear::train::cuda {

class CublasHandle {
 public:
  CublasHandle() = default;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle();
  Status create();
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// Where one trained tensor sits in the CPU AdamW's flat order and in the device buffer.
struct FlatPiece {
  long cpu_offset, gpu_offset, count;
};

// The CPU AdamW flattens trainable_parameters(students) in order (layers, then each mixer's
// parameters()); the device buffer holds each trained layer's gpu_hybrid_layout block, layer
// trained[i] at block_offset[i]. `what` names the trainer in errors.
Result<std::vector<FlatPiece>> flat_pieces(MixerStack& students, const std::vector<int>& trained,
                                           const std::vector<long>& block_offset,
                                           const std::string& what);

}  // namespace golinear::train::cuda
