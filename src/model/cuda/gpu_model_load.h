// A checkpoint directory straight to the GPU: the backbone's tensors go from the mapped
// safetensors to device bf16 through a bounded pinned staging buffer (bf16 copied as stored,
// f16/f32 rounded to bf16 as __float2bfloat16 rounds; norms and biases fp32), never as an fp32
// copy of the model in host memory. The device layout is gpu_model_upload's exactly (w_qkv
// stacks [q; k; v], w_gate_up [gate; up]), so both give the same logits.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "model/cuda/gpu_model.h"

namespace golinear::model::cuda {

// What a load moved.
struct GpuLoadStats {
  size_t bytes_uploaded = 0;       // host → device bytes of the backbone (mixers not counted)
  size_t peak_staging_bytes = 0;   // host memory held at once for the transfer (pinned buffers
                                   // plus the largest fp32 vector converted on the host)
  long tensors = 0;
  double seconds = 0;
};

// The backbone of the checkpoint in `dir` (an adapter's base, model_directory_resolve) onto the
// current GPU. `skeleton` is model_load(dir, ModelLoadParts::without_backbone): its config, its
// mixers (uploaded by GpuModel::set_layer_mixer, as gpu_model_upload does) and its LoRA adapters
// (unmerged, GpuModel::set_lora). Errors name the file and tensor.
Result<std::unique_ptr<GpuModel>> gpu_model_load(const std::string& dir, const Model& skeleton,
                                                 GpuLoadStats* stats = nullptr);

// Device memory in use on the current GPU (cudaMemGetInfo: total − free, every process's).
Result<size_t> gpu_memory_in_use();

}  // namespace golinear::model::cuda
