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

}  // namespace golinear::cli
