#include "serve/metrics.h"

#include <sstream>

namespace golinear::serve {

void Metrics::count_http(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++http_[{endpoint, status}];
}

void Metrics::count_finished(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++finished_[reason];
}

namespace {

void family(std::ostringstream& out, const char* name, const char* type, const char* help) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

template <class T>
void sample(std::ostringstream& out, const char* name, const char* type, const char* help, T v) {
  family(out, name, type, help);
  out << name << ' ' << v << '\n';
}

}  // namespace

std::string Metrics::render(const MetricsGauges& g) const {
  std::ostringstream out;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    family(out, "golinear_http_requests_total", "counter",
           "HTTP requests answered, by endpoint and status code.");
    for (const auto& [key, n] : http_)
      out << "golinear_http_requests_total{endpoint=\"" << key.first << "\",code=\"" << key.second
          << "\"} " << n << '\n';
    family(out, "golinear_requests_finished_total", "counter",
           "Generation requests finished, by reason (stop, length, cancelled, error).");
    for (const auto& [reason, n] : finished_)
      out << "golinear_requests_finished_total{reason=\"" << reason << "\"} " << n << '\n';
  }
  sample(out, "golinear_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
         prompt_tokens.load());
  sample(out, "golinear_prompt_tokens_cached_total", "counter",
         "Prompt tokens restored from the prompt-state cache instead of prefilled.",
         prompt_tokens_cached.load());
  sample(out, "golinear_prompt_tokens_prefilled_total", "counter", "Prompt tokens prefilled.",
         prompt_tokens_prefilled.load());
  sample(out, "golinear_generation_tokens_total", "counter", "Tokens generated.",
         generation_tokens.load());
  sample(out, "golinear_decode_steps_total", "counter",
         "Decode steps (each advances every running sequence by one token).", decode_steps.load());
  sample(out, "golinear_decode_step_sequences_total", "counter",
         "Sequences advanced, summed over decode steps (divide by steps: mean batch size).",
         decode_step_sequences.load());
  sample(out, "golinear_requests_rejected_total", "counter",
         "Requests answered 503 because the wait queue was full.",
         requests_rejected_queue_full.load());
  sample(out, "golinear_requests_running", "gauge", "Requests holding a slot.", g.requests_running);
  sample(out, "golinear_requests_waiting", "gauge", "Requests waiting for a slot.",
         g.requests_waiting);
  sample(out, "golinear_slots", "gauge", "Sequence slots (--parallel).", g.slots);
  sample(out, "golinear_state_bytes", "gauge", "Bytes held by the slots' decode states.",
         g.state_bytes);
  sample(out, "golinear_prompt_cache_entries", "gauge", "Prompt-state cache entries.",
         g.cache_entries);
  sample(out, "golinear_prompt_cache_bytes", "gauge", "Bytes held by the prompt-state cache.",
         g.cache_bytes);
  sample(out, "golinear_prompt_cache_capacity_bytes", "gauge",
         "Budget of the prompt-state cache (--cache-ram).", g.cache_capacity_bytes);
  sample(out, "golinear_prompt_cache_hits_total", "counter",
         "Requests whose prompt started with a cached prompt.", g.cache_hits);
  sample(out, "golinear_prompt_cache_misses_total", "counter", "Requests with no cached prefix.",
         g.cache_misses);
  sample(out, "golinear_prompt_cache_evictions_total", "counter",
         "Entries evicted from the prompt-state cache.", g.cache_evictions);
  return out.str();
}

}  // namespace golinear::serve
