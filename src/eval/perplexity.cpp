#include "eval/perplexity.h"

#include <cmath>

#include "common/progress.h"

namespace golinear::eval {

std::vector<int32_t> eval_token_stream(const std::vector<std::string>& documents,
                                       const Tokenizer& tokenizer, int eos_id) {
  std::vector<int32_t> stream;
  for (const std::string& doc : documents) {
    std::vector<int32_t> ids = tokenizer.encode(doc, /*add_special=*/false);
    stream.insert(stream.end(), ids.begin(), ids.end());
    stream.push_back(eos_id);
  }
  return stream;
}

Result<PerplexityResult> perplexity(const LogitsForward& forward, int vocab_size,
                                    const std::vector<int32_t>& stream, int bos_id, int seq_len,
                                    bool show_progress) {
  if (seq_len < 2) return make_error("perplexity: --seq-len must be at least 2");
  if (bos_id < 0) return make_error("perplexity: the model defines no BOS token");
  if (stream.empty()) return make_error("perplexity: no tokens to evaluate");
  const int V = vocab_size;
  const long body = seq_len - 1;
  const long windows = ((long)stream.size() + body - 1) / body;
  PerplexityResult result;
  double nll = 0;
  ProgressBar bar("ppl", windows);
  std::vector<int32_t> window;
  std::vector<float> logits;
  for (long w = 0; w < windows; ++w) {
    const long begin = w * body, end = std::min((long)stream.size(), begin + body);
    window.assign(1, bos_id);
    window.insert(window.end(), stream.begin() + begin, stream.begin() + end);
    const int T = (int)window.size();
    logits.resize((long)T * V);
    GL_TRY(forward(window.data(), T, logits.data()));
    for (float lp : logprobs_of_next_tokens(logits.data(), window.data(), T, V)) nll -= lp;
    result.tokens += T - 1;
    if (show_progress) bar.update(w + 1, (double)result.tokens);
  }
  if (show_progress) bar.finish();
  result.windows = windows;
  result.mean_nll = nll / result.tokens;
  result.ppl = std::exp(result.mean_nll);
  return result;
}

Result<PerplexityResult> perplexity(const Model& model, const std::vector<int32_t>& stream,
                                    int bos_id, int seq_len, bool show_progress) {
  auto forward = [&model](const int32_t* ids, int T, float* logits) -> Status {
    model_forward(model, ids, T, logits);
    return ok_status();
  };
  return perplexity(forward, model.config.vocab_size, stream, bos_id, seq_len, show_progress);
}

}  // namespace golinear::eval
