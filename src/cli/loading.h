// Loading what a command needs from a checkpoint directory, and the --device option.
#pragma once

#include <memory>
#include <string>

#include "cli/args.h"
#include "common/json.h"
#include "model/context_limit.h"
#include "model/transformer.h"
#include "runtime/sequence_slots.h"
#include "tokenizer/tokenizer.h"
#ifdef GOLINEAR_HAVE_CUDA
#include "model/cuda/gpu_model.h"
#endif

namespace golinear::cli {

struct LoadedModel {
  LoadedModel(std::unique_ptr<Model> m, Tokenizer t) : model(std::move(m)), tokenizer(std::move(t)) {}
  // The host model: all of it for --device cpu; for --device cuda only its config and mixers
  // (ModelLoadParts::without_backbone), the backbone being on the GPU.
  std::unique_ptr<Model> model;
  Tokenizer tokenizer;
#ifdef GOLINEAR_HAVE_CUDA
  std::shared_ptr<golinear::model::cuda::GpuModel> gpu;  // --device cuda: the whole model, bf16
#endif
  Json memory = Json::object();         // --device cuda: what loading used (memory_report)
  size_t gpu_in_use_peak = 0;           // the most GPU memory in use seen by memory_checkpoint
};

// The config.json and the tokenizer of MODEL `dir`: an adapter's come from its base
// (model_directory_resolve, which checks the base's fingerprint).
Result<ModelConfig> load_model_config(const std::string& dir);
Result<Tokenizer> load_tokenizer(const std::string& dir);

// The tokenizer and the model of `dir` (a checkpoint, a linearized checkpoint or an adapter)
// for `device` ("cpu" or "cuda"; `command`, e.g. "eval ppl", names it in errors). cuda: the
// backbone goes from the safetensors straight to the GPU in bf16
// (golinear::model::cuda::gpu_model_load), never as host fp32; a line on stderr says what was
// uploaded.
Result<LoadedModel> load_model_and_tokenizer(const std::string& dir, const std::string& device = "cpu",
                                             const std::string& command = "");

// --device cuda: samples the GPU memory in use (for memory_report's peak) at a point where the
// command holds its working memory (e.g. during decoding). Nothing for cpu.
void memory_checkpoint(LoadedModel& loaded);

// --device cuda: "golinear COMMAND: memory: host peak RSS X GiB, GPU Y GiB (...)" on stderr (peak
// RSS from getrusage; GPU in use from cudaMemGetInfo, every process's, at the end of loading and
// at memory_checkpoint()s and now, the largest counted), and the same figures as JSON, e.g. for a report. Nothing for cpu.
Json memory_report(LoadedModel& loaded, const std::string& command);

// --device cpu|cuda of `command` (e.g. "eval ppl"), "cpu" when absent; an error line for any
// other value, and for cuda in a build without CUDA.
Result<std::string> device_option(const Args& args, const std::string& command);

// `count` sequence slots of the loaded model on its device (runtime::CpuSequenceSlots, or
// GpuSequenceSlots of max_context tokens each); the error names the command and says to lower
// --batch when the GPU slots do not fit.
Result<std::unique_ptr<runtime::SequenceSlots>> sequence_slots_of(const LoadedModel& loaded,
                                                                  const std::string& device,
                                                                  int count, long max_context,
                                                                  const std::string& command);

// The context limit of the checkpoint in `dir` (model/context_limit.h) with the host's physical
// memory as the bound of a linear model.
Result<ContextLimit> context_limit_of(const std::string& dir);

// Option --NAME, a number of tokens in [min_value, limit.tokens] (`fallback`, capped at the limit,
// when absent); past the limit, one line naming it and why.
Result<long> context_option(const Args& args, const std::string& command, const std::string& name,
                            long fallback, long min_value, const ContextLimit& limit);

}  // namespace golinear::cli
