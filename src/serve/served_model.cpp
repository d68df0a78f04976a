#include <algorithm>
#include <filesystem>

#include "common/file.h"
#include "serve/request.h"

namespace golinear::serve {

Result<ServedModel> served_model_make(const std::string& dir, const std::string& name,
                                      long max_context, const Tokenizer& tokenizer,
                                      const std::vector<int>& eos_ids,
                                      const std::string& chat_template_file) {
  ServedModel model;
  model.name = name;
  model.max_context = max_context;
  model.tokenizer = &tokenizer;
  ChatTemplateConfig config;
  const std::string config_path = dir + "/tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    GL_ASSIGN_OR_RETURN(config, chat_template_config_read(config_path));
  }
  std::string source = config.chat_template;
  std::string source_name = config_path;
  if (!chat_template_file.empty()) {
    GL_ASSIGN_OR_RETURN(source, file_read_text(chat_template_file));
    source_name = chat_template_file;
  }
  if (!source.empty()) {
    auto parsed = chat_template_parse(source);
    if (!parsed.ok()) return make_error(source_name, ": ", parsed.error());
    model.chat_template = std::move(*parsed);
  }
  model.bos_token = config.bos_token;
  model.eos_token = config.eos_token;
  auto add_stop = [&](std::optional<int32_t> id) {
    if (id && *id < tokenizer.vocab_size() &&
        std::find(model.stop_ids.begin(), model.stop_ids.end(), *id) == model.stop_ids.end())
      model.stop_ids.push_back(*id);
  };
  for (int id : eos_ids) add_stop(id);
  if (!config.eos_token.empty()) add_stop(tokenizer.token_id(config.eos_token));
  for (const char* end_of_turn : {"<|eot_id|>", "<|im_end|>"}) {
    auto id = tokenizer.token_id(end_of_turn);
    if (id && tokenizer.is_special(*id)) add_stop(id);
  }
  return model;
}

}  // namespace golinear::serve
