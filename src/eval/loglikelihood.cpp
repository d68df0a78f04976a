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

// Requests whose input is a prefix of the leader's are scored from the leader's rows.
struct Group {
  size_t leader;
  std::vector<size_t> members;
  int first_row;  // first row any member needs
};

struct PreparedRequests {
  std::vector<ModelInput> inputs;
  std::vector<Group> groups;  // longest input first
  bool truncated = false;     // some input was cut on the left
};

Result<PreparedRequests> prepare_requests(const std::vector<TokenizedRequest>& requests,
                                          int max_length) {
  PreparedRequests p;
  std::vector<ModelInput>& inputs = p.inputs;
  inputs.resize(requests.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    const TokenizedRequest& request = requests[r];
    const long n = (long)request.continuation_ids.size();
    if (n == 0) return make_error("a continuation encodes to no tokens");
    if (n > max_length)
      return make_error("a continuation of ", n, " tokens does not fit the model's ", max_length,
                        " positions");
    std::vector<int32_t> full = request.context_ids;
    full.insert(full.end(), request.continuation_ids.begin(), request.continuation_ids.end());
    if ((long)full.size() > max_length + 1) {
      full.erase(full.begin(), full.end() - (max_length + 1));
      p.truncated = true;
    }
    full.pop_back();
    inputs[r].first_row = (int)(full.size() - n);
    inputs[r].ids = std::move(full);
  }
  // Longest input first; every request whose input is a prefix of it is scored from its rows.
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return inputs[a].ids.size() > inputs[b].ids.size(); });
  std::vector<bool> grouped(requests.size(), false);
  for (size_t leader : order) {
    if (grouped[leader]) continue;
    const std::vector<int32_t>& ids = inputs[leader].ids;
    Group group{leader, {}, inputs[leader].first_row};
    for (size_t r : order) {
      const std::vector<int32_t>& other = inputs[r].ids;
      if (grouped[r] || other.size() > ids.size() || !std::equal(other.begin(), other.end(), ids.begin()))
        continue;
      group.members.push_back(r);
      group.first_row = std::min(group.first_row, inputs[r].first_row);
      grouped[r] = true;
    }
    p.groups.push_back(std::move(group));
  }
  return p;
}

// The members' results from their group's rows: rows (T − group.first_row, V).
void score_group(const PreparedRequests& p, const Group& group,
                 const std::vector<TokenizedRequest>& requests, const float* rows, int V,
                 std::vector<LoglikelihoodResult>& results) {
  for (size_t r : group.members) {
    const float* own_rows = rows + (long)(p.inputs[r].first_row - group.first_row) * V;
    results[r] = continuation_loglikelihood(own_rows, V, requests[r].continuation_ids);
  }
}

}  // namespace

Result<std::vector<LoglikelihoodResult>> loglikelihood_score_requests(
    const Model& model, const std::vector<TokenizedRequest>& requests, int max_length,
    bool share_prefix) {
  const int V = model.config.vocab_size;
  GL_ASSIGN_OR_RETURN(const PreparedRequests prepared, prepare_requests(requests, max_length));
  const std::vector<ModelInput>& inputs = prepared.inputs;
  const std::vector<Group>& groups = prepared.groups;
  // The prefix every group's forward shares: all of the input before the first row any of them
  // needs. Shared only when that is every group's first row (the requests of one context), so
  // that each forward makes exactly the calls of the reference path: a shorter shared prefix
  // would split the prefill elsewhere and change the results in the last bits.
  int shared = 0;
  std::vector<float> head_logits(V), rows;
  SequenceCache prefix = model_new_cache(model);
  if (share_prefix && !prepared.truncated && groups.size() > 1) {
    const std::vector<int32_t>& first = inputs[groups[0].leader].ids;
    shared = groups[0].first_row;
    for (const Group& group : groups) {
      const std::vector<int32_t>& ids = inputs[group.leader].ids;
      shared = std::min(shared, group.first_row);
      shared = (int)(std::mismatch(first.begin(), first.begin() + std::max(shared, 0), ids.begin()).first -
                     first.begin());
    }
    shared = std::max(shared, 0);
    for (const Group& group : groups)
      if (group.first_row != shared) shared = 0;
    if (shared > 0)
      model_forward_cached(model, prefix, first.data(), shared, head_logits.data(), /*last_only=*/true);
  }
  std::vector<LoglikelihoodResult> results(requests.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const Group& group = groups[g];
    const std::vector<int32_t>& ids = inputs[group.leader].ids;
    const int T = (int)ids.size(), first_row = group.first_row;
    SequenceCache cache = shared == 0            ? model_new_cache(model)
                          : g + 1 < groups.size() ? prefix.clone()
                                                  : std::move(prefix);
    if (first_row > shared)
      model_forward_cached(model, cache, ids.data() + shared, first_row - shared,
                           head_logits.data(), /*last_only=*/true);
    rows.resize((long)(T - first_row) * V);
    model_forward_cached(model, cache, ids.data() + first_row, T - first_row, rows.data(),
                         /*last_only=*/false);
    score_group(prepared, group, requests, rows.data(), V, results);
  }
  return results;
}

RowsForward cpu_rows_forward(const Model& model) {
  return [&model](const std::vector<RowsInput>& inputs, float* rows) -> Status {
    const size_t V = model.config.vocab_size;
    std::vector<float> last(V);
    for (const RowsInput& in : inputs) {
      if (in.T <= 0 || in.first_row < 0 || in.first_row >= in.T)
        return make_error("cpu rows: rows [", in.first_row, ", ", in.T, ") of ", in.T, " tokens");
      SequenceCache cache = model_new_cache(model);
      if (in.first_row > 0)
        model_forward_cached(model, cache, in.ids, in.first_row, last.data(), /*last_only=*/true);
      model_forward_cached(model, cache, in.ids + in.first_row, in.T - in.first_row, rows,
                           /*last_only=*/false);
      rows += (size_t)(in.T - in.first_row) * V;
    }
    return ok_status();
  };
}

Result<std::vector<std::vector<LoglikelihoodResult>>> loglikelihood_score_documents(
    const RowsForward& forward, int vocab_size,
    const std::vector<std::vector<TokenizedRequest>>& documents, int max_length,
    const RowsPassLimits& limits, long first_document) {
  const size_t V = vocab_size;
  std::vector<PreparedRequests> prepared(documents.size());
  std::vector<std::vector<LoglikelihoodResult>> results(documents.size());
  for (size_t d = 0; d < documents.size(); ++d) {
    auto p = prepare_requests(documents[d], max_length);
    if (!p.ok()) return make_error("document ", first_document + (long)d, ": ", p.error());
    prepared[d] = std::move(*p);
    results[d].resize(documents[d].size());
  }
  // Every (document, group) in order, cut into passes.
  struct Member {
    size_t document, group;
  };
  std::vector<Member> pass;
  std::vector<RowsInput> inputs;
  std::vector<float> rows;
  long pass_tokens = 0, pass_rows = 0;
  auto run_pass = [&]() -> Status {
    if (pass.empty()) return ok_status();
    rows.resize((size_t)pass_rows * V);
    GL_TRY(forward(inputs, rows.data()));
    const float* at = rows.data();
    for (const Member& m : pass) {
      const PreparedRequests& p = prepared[m.document];
      const Group& group = p.groups[m.group];
      score_group(p, group, documents[m.document], at, (int)V, results[m.document]);
      at += (size_t)(p.inputs[group.leader].ids.size() - group.first_row) * V;
    }
    pass.clear();
    inputs.clear();
    pass_tokens = pass_rows = 0;
    return ok_status();
  };
  for (size_t d = 0; d < documents.size(); ++d) {
    for (size_t g = 0; g < prepared[d].groups.size(); ++g) {
      const Group& group = prepared[d].groups[g];
      const std::vector<int32_t>& ids = prepared[d].inputs[group.leader].ids;
      const long T = (long)ids.size(), n = T - group.first_row;
      if (!pass.empty() && (pass_tokens + T > limits.max_tokens || pass_rows + n > limits.max_rows))
        GL_TRY(run_pass());
      pass.push_back({d, g});
      inputs.push_back({ids.data(), (int)T, group.first_row});
      pass_tokens += T;
      pass_rows += n;
    }
  }
  GL_TRY(run_pass());
  return results;
}

Result<std::vector<LoglikelihoodResult>> loglikelihood_score_requests(
    const RowsForward& forward, int vocab_size, const std::vector<TokenizedRequest>& requests,
    int max_length) {
  GL_ASSIGN_OR_RETURN(auto results,
                      loglikelihood_score_documents(forward, vocab_size, {requests}, max_length,
                                                    {.max_tokens = 1, .max_rows = 1}));
  return std::move(results[0]);
}

}  // namespace golinear::eval
