// Loading what a command needs from a checkpoint directory, and the --device option.
#pragma once

#include <memory>
#include <string>

#include "cli/args.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"
#ifdef GOLINEAR_HAVE_CUDA
#include "model/cuda/gpu_model.h"
#endif

namespace golinear::cli {

struct LoadedModel {
  std::unique_ptr<Model> model;
  Tokenizer tokenizer;
};

Result<LoadedModel> load_model_and_tokenizer(const std::string& dir);

// --device cpu|cuda of `command` (e.g. "eval ppl"), "cpu" when absent; an error line for any
// other value, and for cuda in a build without CUDA.
Result<std::string> device_option(const Args& args, const std::string& command);

#ifdef GOLINEAR_HAVE_CUDA
// `model` uploaded for --device cuda (bf16), or the error line "golinear COMMAND --device cuda: …"
// (an unsupported head_dim or recipe, no GPU, out of memory).
Result<std::unique_ptr<cuda::GpuModel>> upload_to_gpu(const Model& model, const std::string& command);
#endif

}  // namespace golinear::cli
