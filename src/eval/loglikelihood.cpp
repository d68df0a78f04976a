#include "eval/loglikelihood.h"

#include <algorithm>
#include <numeric>

namespace golinear::eval {

TokenizedRequest request_tokenize(const Tokenizer& tokenizer, const LikelihoodRequest& request,
                                  const TokenizeOptions& options) {
  std::string context = request.context, continuation = request.continuation;
  TokenizedRequest out;
  if (context.empty()) {
    out.context_ids = {options.prefix_token_id};
    out.continuation_ids = tokenizer.encode(continuation, /*add_special=*/false);
    return out;
  }
  // Python's rstrip() of ASCII whitespace.
  const size_t kept = context.find_last_not_of(" \t\n\r\v\f");
  const size_t n_spaces = kept == std::string::npos ? context.size() : context.size() - kept - 1;
  if (n_spaces > 0) {
    continuation = context.substr(context.size() - n_spaces) + continuation;
    context.resize(context.size() - n_spaces);
  }
  std::vector<int32_t> whole = tokenizer.encode(context + continuation, options.add_special);
  out.context_ids = tokenizer.encode(context, options.add_special);
  const size_t split = std::min(out.context_ids.size(), whole.size());
  out.continuation_ids.assign(whole.begin() + split, whole.end());
  return out;
}

LoglikelihoodResult continuation_loglikelihood(const float* rows, int V,
                                               const std::vector<int32_t>& continuation) {
  LoglikelihoodResult result;
  result.is_greedy = true;
  for (size_t j = 0; j < continuation.size(); ++j) {
    const float* row = rows + (long)j * V;
    result.ll += log_softmax_at(row, V, continuation[j]);
    const int greedy = (int)(std::max_element(row, row + V) - row);  // first index on ties
    if (greedy != continuation[j]) result.is_greedy = false;
  }
  return result;
}

namespace {

// What the model reads for one request, and where its continuation rows start.
struct ModelInput {
  std::vector<int32_t> ids;  // (ctx + cont)[-(max_length + 1):][:-1]
  int first_row = 0;         // row predicting the first continuation token
};

}  // namespace

Result<std::vector<LoglikelihoodResult>> loglikelihood_score_requests(
    const Model& model, const std::vector<TokenizedRequest>& requests, int max_length) {
  const int V = model.config.vocab_size;
  std::vector<ModelInput> inputs(requests.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    const TokenizedRequest& request = requests[r];
    const long n = (long)request.continuation_ids.size();
    if (n == 0) return make_error("a continuation encodes to no tokens");
    if (n > max_length)
      return make_error("a continuation of ", n, " tokens does not fit the model's ", max_length,
                        " positions");
    std::vector<int32_t> full = request.context_ids;
    full.insert(full.end(), request.continuation_ids.begin(), request.continuation_ids.end());
    if ((long)full.size() > max_length + 1) full.erase(full.begin(), full.end() - (max_length + 1));
    full.pop_back();
    inputs[r].first_row = (int)(full.size() - n);
    inputs[r].ids = std::move(full);
  }
  // Longest input first; every request whose input is a prefix of it is scored from its rows.
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return inputs[a].ids.size() > inputs[b].ids.size(); });
  std::vector<LoglikelihoodResult> results(requests.size());
  std::vector<bool> done(requests.size(), false);
  std::vector<float> head_logits(V), rows;
  for (size_t leader : order) {
    if (done[leader]) continue;
    const std::vector<int32_t>& ids = inputs[leader].ids;
    std::vector<size_t> group;
    int first_row = inputs[leader].first_row;
    for (size_t r : order) {
      const std::vector<int32_t>& other = inputs[r].ids;
      if (done[r] || other.size() > ids.size() || !std::equal(other.begin(), other.end(), ids.begin()))
        continue;
      group.push_back(r);
      first_row = std::min(first_row, inputs[r].first_row);
    }
    const int T = (int)ids.size();
    SequenceCache cache = model_new_cache(model);
    if (first_row > 0)
      model_forward_cached(model, cache, ids.data(), first_row, head_logits.data(), /*last_only=*/true);
    rows.resize((long)(T - first_row) * V);
    model_forward_cached(model, cache, ids.data() + first_row, T - first_row, rows.data(),
                         /*last_only=*/false);
    for (size_t r : group) {
      const float* own_rows = rows.data() + (long)(inputs[r].first_row - first_row) * V;
      results[r] = continuation_loglikelihood(own_rows, V, requests[r].continuation_ids);
      done[r] = true;
    }
  }
  return results;
}

}  // namespace golinear::eval
