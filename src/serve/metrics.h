// Counters and gauges of the server, rendered as Prometheus text (exposition format 0.0.4) for
// GET /metrics. Counters are atomics bumped by the scheduler and the HTTP handlers; gauges are
// read when the page is made.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace golinear::serve {

struct MetricsGauges {
  long requests_running = 0, requests_waiting = 0, slots = 0;
  size_t state_bytes = 0;  // decode states of all slots
  size_t cache_entries = 0, cache_bytes = 0, cache_capacity_bytes = 0;
  uint64_t cache_hits = 0, cache_misses = 0, cache_evictions = 0;
};

class Metrics {
 public:
  std::atomic<uint64_t> prompt_tokens{0};         // prompt tokens of admitted requests
  std::atomic<uint64_t> prompt_tokens_cached{0};  // of which restored from the prompt cache
  std::atomic<uint64_t> prompt_tokens_prefilled{0};
  std::atomic<uint64_t> generation_tokens{0};
  std::atomic<uint64_t> decode_steps{0};
  std::atomic<uint64_t> decode_step_sequences{0};  // Σ batch size over decode steps
  std::atomic<uint64_t> requests_rejected_queue_full{0};

  void count_http(const std::string& endpoint, int status);  // requests by endpoint, status
  void count_finished(const std::string& reason);            // stop, length, cancelled, error
  std::string render(const MetricsGauges& gauges) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> http_;
  std::map<std::string, uint64_t> finished_;
};

}  // namespace golinear::serve
