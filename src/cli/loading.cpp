#include "cli/loading.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "model/linearization.h"
#include "runtime/cpu_sequence_slots.h"

#ifdef GOLINEAR_HAVE_CUDA
#include "model/cuda/gpu_model_load.h"
#include "runtime/cuda/sequence_slots.h"
#endif

namespace golinear::cli {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The largest resident set this process has had (ru_maxrss is in KiB on Linux).
size_t host_peak_rss_bytes() {
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return (size_t)usage.ru_maxrss * 1024;
}

}  // namespace

Result<ModelConfig> load_model_config(const std::string& dir) {
  GL_ASSIGN_OR_RETURN(ModelDirectory where, model_directory_resolve(dir));
  return model_config_read(where.base + "/config.json");
}

Result<Tokenizer> load_tokenizer(const std::string& dir) {
  GL_ASSIGN_OR_RETURN(ModelDirectory where, model_directory_resolve(dir));
  return Tokenizer::load(where.base + "/tokenizer.json");
}

Result<LoadedModel> load_model_and_tokenizer(const std::string& dir, const std::string& device,
                                             const std::string& command) {
  GL_ASSIGN_OR_RETURN(ModelDirectory where, model_directory_resolve(dir));
  GL_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::load(where.base + "/tokenizer.json"));
  const ModelLoadParts parts = device == "cuda" ? ModelLoadParts::without_backbone : ModelLoadParts::all;
  GL_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, model_load(dir, parts));
  // LoRA adapters (model/lora.h): folded into the fp32 weights for the CPU (W + s·B A, exact to
  // fp32 rounding, no cost per token); kept unmerged for the GPU, whose bf16 weights would round
  // away most of a small s·B A.
  if (parts == ModelLoadParts::all) lora_merge_into_weights(*model);
  if (tokenizer.vocab_size() > model->config.vocab_size)
    return make_error(where.base, "/tokenizer.json: ", tokenizer.vocab_size(),
                      " tokens do not fit the model's vocab_size ", model->config.vocab_size);
  LoadedModel loaded(std::move(model), std::move(tokenizer));
#ifdef GOLINEAR_HAVE_CUDA
  if (device == "cuda") {
    golinear::model::cuda::GpuLoadStats stats;
    auto gpu = golinear::model::cuda::gpu_model_load(dir, *loaded.model, &stats);
    if (!gpu.ok()) return make_error("golinear ", command, " --device cuda: ", gpu.error());
    loaded.gpu = std::move(*gpu);
    auto in_use = golinear::model::cuda::gpu_memory_in_use();
    loaded.gpu_in_use_peak = in_use.ok() ? *in_use : 0;
    loaded.memory = {{"upload_bytes", stats.bytes_uploaded},
                     {"staging_peak_bytes", stats.peak_staging_bytes},
                     {"weight_bytes", loaded.gpu->weight_bytes()},
                     {"load_seconds", stats.seconds},
                     {"gpu_in_use_after_load_bytes", in_use.ok() ? *in_use : 0}};
    std::fprintf(stderr,
                 "golinear %s: loaded %ld tensors to the GPU in %.1f s: %.2f GiB uploaded as bf16 "
                 "(+ mixers, %.2f GiB of weights in all), host staging peak %.0f MiB\n",
                 command.c_str(), stats.tensors, stats.seconds, stats.bytes_uploaded / kGiB,
                 loaded.gpu->weight_bytes() / kGiB, stats.peak_staging_bytes / (1024.0 * 1024.0));
  }
#endif
  return loaded;
}

void memory_checkpoint(LoadedModel& loaded) {
#ifdef GOLINEAR_HAVE_CUDA
  if (!loaded.gpu) return;
  if (auto in_use = golinear::model::cuda::gpu_memory_in_use(); in_use.ok())
    loaded.gpu_in_use_peak = std::max(loaded.gpu_in_use_peak, *in_use);
#else
  (void)loaded;
#endif
}

Json memory_report(LoadedModel& loaded, const std::string& command) {
  Json report = loaded.memory;
#ifdef GOLINEAR_HAVE_CUDA
  if (!loaded.gpu) return Json::object();
  const size_t rss = host_peak_rss_bytes();
  memory_checkpoint(loaded);
  auto now = golinear::model::cuda::gpu_memory_in_use();
  const size_t after_load = report.value("gpu_in_use_after_load_bytes", (size_t)0);
  const size_t at_end = now.ok() ? *now : 0;
  const size_t peak = loaded.gpu_in_use_peak;
  report["host_peak_rss_bytes"] = rss;
  report["gpu_in_use_end_bytes"] = at_end;
  report["gpu_in_use_peak_bytes"] = peak;
  std::fprintf(stderr,
               "golinear %s: memory: host peak RSS %.2f GiB, GPU %.2f GiB (peak in use; after "
               "loading %.2f GiB, at the end %.2f GiB; weights %.2f GiB)\n",
               command.c_str(), rss / kGiB, peak / kGiB, after_load / kGiB, at_end / kGiB,
               loaded.gpu->weight_bytes() / kGiB);
#else
  (void)loaded;
  (void)command;
#endif
  return report;
}

Result<std::unique_ptr<runtime::SequenceSlots>> sequence_slots_of(const LoadedModel& loaded,
                                                                  const std::string& device,
                                                                  int count, long max_context,
                                                                  const std::string& command) {
#ifdef GOLINEAR_HAVE_CUDA
  if (device == "cuda") {
    auto created = golinear::runtime::cuda::GpuSequenceSlots::create(*loaded.gpu, count, max_context);
    if (!created.ok())
      return make_error("golinear ", command, ": ", count, " GPU sequences of ", max_context,
                        " tokens: ", created.error(), " (lower --batch)");
    return std::unique_ptr<runtime::SequenceSlots>(std::move(*created));
  }
#endif
  (void)max_context;  // the CPU caches grow as needed
  (void)command;
  return std::unique_ptr<runtime::SequenceSlots>(
      new runtime::CpuSequenceSlots(*loaded.model, count));
}

Result<std::string> device_option(const Args& args, const std::string& command) {
  const std::string device = args.get("device", "cpu");
  if (device != "cpu" && device != "cuda")
    return make_error("golinear ", command, ": --device must be cpu or cuda, got '", device, "'");
#ifndef GOLINEAR_HAVE_CUDA
  if (device == "cuda") return make_error("golinear ", command, ": --device cuda needs the CUDA build");
#endif
  return device;
}

Result<ContextLimit> context_limit_of(const std::string& dir) {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGE_SIZE);
  const size_t host_memory = pages > 0 && page_size > 0 ? (size_t)pages * (size_t)page_size : (size_t)1 << 34;
  return context_limit_read(dir, host_memory);
}

Result<long> context_option(const Args& args, const std::string& command, const std::string& name,
                            long fallback, long min_value, const ContextLimit& limit) {
  GL_ASSIGN_OR_RETURN(long value, args.get_int(name, std::min(fallback, limit.tokens), min_value, 1L << 62));
  if (value > limit.tokens)
    return make_error("golinear ", command, ": --", name, " ", value, " exceeds the limit of ",
                      limit.tokens, " tokens (", limit.reason, ")");
  return value;
}

}  // namespace golinear::cli
