#include "runtime/generate.h"

#include <algorithm>
#include <memory>

namespace golinear::runtime {

namespace {

bool is_stop(const std::vector<int>& stop_ids, int32_t id) {
  return std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end();
}

}  // namespace

NewSequence cpu_sequences(const Model& model) {
  return [&model](long) -> Result<SequenceStep> {
    auto cache = std::make_shared<SequenceCache>(model_new_cache(model));
    return SequenceStep([&model, cache](const int32_t* ids, int T, float* last_logits) {
      model_forward_cached(model, *cache, ids, T, last_logits, /*last_only=*/true);
      return ok_status();
    });
  };
}

Result<std::vector<int32_t>> generate(const NewSequence& new_sequence, int vocab_size,
                                      const std::vector<int32_t>& prompt,
                                      const GenerateOptions& options,
                                      const std::function<void(int32_t)>& on_token) {
  std::vector<int32_t> out;
  if (prompt.empty() || options.max_new_tokens <= 0) return out;
  GL_ASSIGN_OR_RETURN(SequenceStep step,
                      new_sequence((long)prompt.size() + options.max_new_tokens));
  Sampler sampler(options.sampler);
  std::vector<float> logits(vocab_size);
  GL_TRY(step(prompt.data(), (int)prompt.size(), logits.data()));
  for (int i = 0; i < options.max_new_tokens; ++i) {
    int32_t next = sampler.sample(logits.data(), vocab_size);
    out.push_back(next);
    if (on_token) on_token(next);
    if (is_stop(options.stop_ids, next)) break;
    if (i + 1 < options.max_new_tokens) GL_TRY(step(&next, 1, logits.data()));
  }
  return out;
}

std::vector<int32_t> generate(const Model& model, const std::vector<int32_t>& prompt,
                              const GenerateOptions& options,
                              const std::function<void(int32_t)>& on_token) {
  // The CPU sequence cannot fail.
  return generate(cpu_sequences(model), model.config.vocab_size, prompt, options, on_token).value();
}

Result<std::vector<std::vector<int32_t>>> generate_batch(
    SequenceSlots& slots, const std::vector<BatchRequest>& requests,
    const std::vector<int>& stop_ids,
    const std::function<void(size_t, const std::vector<int32_t>&)>& on_done,
    long max_prefill_tokens) {
  const int S = slots.slots(), V = slots.vocab_size();
  std::vector<std::vector<int32_t>> out(requests.size());
  if (S < 1 && !requests.empty()) return make_error("batched generation: the backend has no slots");
  std::vector<long> running(S, -1);  // the request a slot generates for; −1: free
  std::vector<int32_t> pending(S);   // its last token, decoded at the next step
  std::vector<std::unique_ptr<Sampler>> samplers(S);  // the running request's
  std::vector<float> logits((size_t)S * V);           // a prefill's row, or a step's rows
  std::vector<int32_t> chosen(S);
  size_t next_request = 0;
  const auto end_request = [&](size_t r) {
    if (on_done) on_done(r, out[r]);
  };
  // The slot's chosen token appended to its request, which ends after a stop id or its budget.
  const auto take = [&](int slot, int32_t id) {
    const size_t r = (size_t)running[slot];
    out[r].push_back(id);
    if (is_stop(stop_ids, id) || (int)out[r].size() >= requests[r].max_new_tokens) {
      running[slot] = -1;
      end_request(r);
    } else {
      pending[slot] = id;
    }
  };
  // Free slots take the next requests until each is generating or none is left. A round resets
  // free slots and prefills their prompts whole in one prefill_batch call (while it holds fewer
  // than max_prefill_tokens tokens), then each takes its first token; a request that ends there
  // frees its slot for a later round.
  const auto fill = [&](std::vector<int> free_slots) -> Status {
    std::vector<PrefillChunk> chunks;
    while (!free_slots.empty()) {
      chunks.clear();
      long tokens = 0;
      while (chunks.size() < free_slots.size() && (chunks.empty() || tokens < max_prefill_tokens)) {
        while (next_request < requests.size() && (requests[next_request].prompt.empty() ||
                                                   requests[next_request].max_new_tokens <= 0))
          end_request(next_request++);
        if (next_request == requests.size()) break;
        const BatchRequest& request = requests[next_request];
        const int slot = free_slots[chunks.size()];
        GL_TRY(slots.reset(slot));
        running[slot] = (long)next_request++;
        samplers[slot] = std::make_unique<Sampler>(request.sampler);
        chunks.push_back({slot, request.prompt.data(), (int)request.prompt.size(),
                          &logits[chunks.size() * V]});
        tokens += (long)request.prompt.size();
      }
      if (chunks.empty()) break;
      for (Status& status : slots.prefill_batch(chunks)) GL_TRY(status);
      free_slots.erase(free_slots.begin(), free_slots.begin() + chunks.size());
      for (const PrefillChunk& c : chunks) {
        take(c.slot, samplers[c.slot]->sample(c.last_logits, V));
        if (running[c.slot] < 0) free_slots.push_back(c.slot);
      }
    }
    return ok_status();
  };
  std::vector<int> batch(S), ended;
  for (int s = 0; s < S; ++s) batch[s] = s;
  GL_TRY(fill(batch));
  std::vector<int32_t> ids;
  for (;;) {
    batch.clear();
    ids.clear();
    bool greedy = true;
    for (int s = 0; s < S; ++s)
      if (running[s] >= 0) {
        batch.push_back(s);
        ids.push_back(pending[s]);
        greedy = greedy && requests[running[s]].sampler.greedy();
      }
    const int B = (int)batch.size();
    if (B == 0) break;
    if (greedy) {
      GL_TRY(slots.decode_greedy(batch.data(), ids.data(), B, chosen.data()));
    } else {
      GL_TRY(slots.decode(batch.data(), ids.data(), B, logits.data()));
#pragma omp parallel for schedule(dynamic) if (B > 1)
      for (int b = 0; b < B; ++b) chosen[b] = samplers[batch[b]]->sample(&logits[(size_t)b * V], V);
    }
    for (int b = 0; b < B; ++b) take(batch[b], chosen[b]);
    ended.clear();
    for (int s : batch)
      if (running[s] < 0) ended.push_back(s);
    GL_TRY(fill(ended));
  }
  return out;
}

}  // namespace golinear::runtime
