#include <cstdio>
#include <functional>
#include <memory>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/loading.h"
#include "io/jsonl.h"
#include "runtime/generate.h"
#ifdef GOLINEAR_HAVE_CUDA
#include "runtime/cuda/gpu_sequences.h"
#endif

namespace golinear::cli {

namespace {

// The token ids of one input row: {"ids": [...]} as given, or {"text": ...} tokenized with the
// tokenizer's special tokens (BOS).
Result<std::vector<int32_t>> row_ids(const Json& row, const Tokenizer& tokenizer, int vocab_size,
                                     const std::string& what) {
  if (!row.is_object()) return make_error(what, ": expected an object with \"text\" or \"ids\"");
  std::vector<int32_t> ids;
  if (row.contains("ids")) {
    GL_ASSIGN_OR_RETURN(ids, json_get<std::vector<int32_t>>(row, "ids", what));
  } else if (row.contains("text")) {
    GL_ASSIGN_OR_RETURN(std::string text, json_get<std::string>(row, "text", what));
    ids = tokenizer.encode(text, true);
  } else {
    return make_error(what, ": expected a field \"text\" or \"ids\"");
  }
  if (ids.empty()) return make_error(what, ": no tokens to score");
  for (int32_t id : ids)
    if (id < 0 || id >= vocab_size)
      return make_error(what, ": token id ", id, " outside the vocabulary [0, ", vocab_size, ")");
  return ids;
}

}  // namespace

int cmd_score(const Argv& argv) {
  auto args = Args::parse("score", argv, {{"input", true}, {"mode", true}, {"device", true}}, 1, 1);
  if (!args.ok()) return fail(args.error());
  if (!args->has("input")) return fail("golinear score: --input FILE.jsonl is required");
  const std::string mode = args->get("mode", "prefill");
  if (mode != "prefill" && mode != "decode")
    return fail("golinear score: --mode must be prefill or decode, got '" + mode + "'");
  auto device_value = device_option(*args, "score");
  if (!device_value.ok()) return fail(device_value.error());
  const std::string device = *device_value;
  const std::string input = args->get("input");
  auto rows = jsonl_read(input);
  if (!rows.ok()) return fail(rows.error());
  auto loaded = load_model_and_tokenizer(args->positional()[0], device, "score");
  if (!loaded.ok()) return fail(loaded.error());
  const Model& model = *loaded->model;
  const int V = model.config.vocab_size;

  std::vector<std::vector<int32_t>> all_ids;
  for (size_t i = 0; i < rows->size(); ++i) {
    auto ids = row_ids((*rows)[i], loaded->tokenizer, V, str_cat(input, ":", i + 1));
    if (!ids.ok()) return fail(ids.error());
    all_ids.push_back(std::move(*ids));
  }
  // The two ways of scoring, on the CPU model or on the GPU (bf16, model/cuda/gpu_model.h):
  // logits of a whole sequence (prefill), and a sequence fed one token at a time (decode).
  std::function<Status(const int32_t*, int, float*)> forward = [&model](const int32_t* ids, int T, float* logits) {
    model_forward(model, ids, T, logits);
    return ok_status();
  };
  runtime::NewSequence sequences = runtime::cpu_sequences(model);
#ifdef GOLINEAR_HAVE_CUDA
  if (device == "cuda") {
    golinear::model::cuda::GpuModel& gpu = *loaded->gpu;
    forward = [&gpu](const int32_t* ids, int T, float* logits) { return gpu.forward(ids, T, logits, false); };
    sequences = golinear::runtime::cuda::gpu_sequences(gpu);
  }
#endif
  for (const auto& ids : all_ids) {
    const int T = (int)ids.size();
    std::vector<float> logprobs;
    if (mode == "prefill") {
      std::vector<float> logits((long)T * V);
      if (Status st = forward(ids.data(), T, logits.data()); !st.ok()) return fail(st.error());
      logprobs = logprobs_of_next_tokens(logits.data(), ids.data(), T, V);
      memory_checkpoint(*loaded);  // the forward's activations are held
    } else {
      // One token at a time through the per-sequence cache (constant memory for linear mixers).
      auto step = sequences(T);
      if (!step.ok()) return fail(step.error());
      std::vector<float> logits(V);
      for (int t = 0; t + 1 < T; ++t) {
        if (Status st = (*step)(&ids[t], 1, logits.data()); !st.ok()) return fail(st.error());
        logprobs.push_back(log_softmax_at(logits.data(), V, ids[t + 1]));
      }
      memory_checkpoint(*loaded);  // the sequence's cache is held
    }
    Json out = {{"ids", ids}, {"logprobs", logprobs}};
    std::printf("%s\n", out.dump().c_str());
  }
  memory_report(*loaded, "score");
  return 0;
}

}  // namespace golinear::cli
