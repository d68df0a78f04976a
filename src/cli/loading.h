// Loading what a command needs from a checkpoint directory.
#pragma once

#include <memory>
#include <string>

#include "model/transformer.h"
#include "tokenizer/tokenizer.h"

namespace golinear::cli {

struct LoadedModel {
  std::unique_ptr<Model> model;
  Tokenizer tokenizer;
};

Result<LoadedModel> load_model_and_tokenizer(const std::string& dir);

}  // namespace golinear::cli
