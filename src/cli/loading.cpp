#include "cli/loading.h"

namespace golinear::cli {

Result<LoadedModel> load_model_and_tokenizer(const std::string& dir) {
  GL_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::load(dir + "/tokenizer.json"));
  GL_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, model_load(dir));
  if (tokenizer.vocab_size() > model->config.vocab_size)
    return make_error(dir, "/tokenizer.json: ", tokenizer.vocab_size(),
                      " tokens do not fit the model's vocab_size ", model->config.vocab_size);
  return LoadedModel{std::move(model), std::move(tokenizer)};
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

#ifdef GOLINEAR_HAVE_CUDA
Result<std::unique_ptr<cuda::GpuModel>> upload_to_gpu(const Model& model, const std::string& command) {
  auto gpu = cuda::gpu_model_upload(model);
  if (!gpu.ok()) return make_error("golinear ", command, " --device cuda: ", gpu.error());
  return gpu;
}
#endif

}  // namespace golinear::cli
