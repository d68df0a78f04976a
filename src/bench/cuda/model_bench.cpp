// The whole-model benchmark (model_bench.h).
#include "bench/cuda/model_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <random>
#include <sstream>

#include "bench/cuda/cuda_timing.h"
#include "io/config.h"
#include "model/cuda/gpu_model.h"
#include "model/transformer.h"

namespace golinear::bench::cuda {

using namespace golinear::model::cuda;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int kDecodeWarmups = 3;  // untimed decode steps before the timed ones

// Device memory in use now (cudaMemGetInfo: total − free), bytes.
size_t used_now() {
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
  return total - free;
}

bool is_oom(const std::string& message) { return message.find("out of GPU memory") != std::string::npos || message.find("out of memory") != std::string::npos; }

struct Row {
  std::string model;  // "hybrid" | "full"
  long context = 0;
  double prefill_ms = -1, decode_ms = -1;  // < 0: not measured
  int prefill_runs = 0, decode_runs = 0;
  double weights_bytes = 0, cache_bytes = 0, peak_used_bytes = 0;
  std::string prefill_note, decode_note;
};

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string date_now() {
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  return date;
}

Status write_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return make_error("bench: cannot write ", path);
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) return make_error("bench: cannot write ", path);
  return ok_status();
}

struct BatchRow {
  std::string model;
  long context = 0;
  int batch = 0;
  double step_ms = -1;  // < 0: not measured
  double cache_bytes = 0, peak_used_bytes = 0;
  std::string note;
};

// The concurrency table (ModelBenchOptions::batches).
Result<std::string> batch_bench_run(const ModelBenchOptions& o, GpuModel& gm,
                                    const std::string& source, const cudaDeviceProp& prop,
                                    size_t used_before) {
  const ModelConfig& c = gm.config();
  mixers::MixerOptions hybrid_options;  // the default recipe
  hybrid_options.sinks = o.sinks;
  hybrid_options.window = o.window;
  std::vector<long> contexts = o.contexts;
  std::sort(contexts.begin(), contexts.end());
  std::vector<int> batches = o.batches;
  std::sort(batches.begin(), batches.end());
  const int steps = kDecodeWarmups + o.decode_repeats;
  std::vector<BatchRow> rows;
  for (const std::string& variant : o.variants) {
    if (variant == "hybrid") {
      GL_TRY(gm.set_all_hybrid_random(hybrid_options, o.seed));
    } else {
      gm.set_all_softmax();
    }
    for (long N : contexts) {
      bool out_of_memory = false;
      for (int B : batches) {
        BatchRow r;
        r.model = variant;
        r.context = N;
        r.batch = B;
        if (out_of_memory) {  // a larger batch of the same context does not fit either
          r.note = "out of memory";
          rows.push_back(r);
          continue;
        }
        std::vector<std::unique_ptr<GpuSequenceCache>> caches;
        Status made = ok_status();
        for (int b = 0; b < B && made.ok(); ++b) {
          auto created = GpuSequenceCache::create(gm, N + steps);
          if (!created.ok()) {
            made = std::move(created).take_error();
            break;
          }
          caches.push_back(std::move(created).value());
          r.cache_bytes += (double)caches.back()->bytes();
          made = caches.back()->fill_random(N, o.seed + 1000 * N + b);
        }
        if (!made.ok()) {
          if (!is_oom(made.error())) return make_error(made.error());
          const double per = variant == "full"
                                 ? (double)(N + steps) * c.num_kv_heads * c.head_dim * 4 * c.num_layers
                                 : r.cache_bytes / std::max<size_t>(1, caches.size());
          r.note = "out of memory (" + fmt("%.1f", per * B / kGiB) + " GiB of caches)";
          out_of_memory = true;
          caches.clear();
          gm.release_scratch();
          cudaGetLastError();
          rows.push_back(r);
          continue;
        }
        std::vector<GpuSequenceCache*> ptrs;
        for (auto& cache : caches) ptrs.push_back(cache.get());
        std::vector<int32_t> ids(B);
        std::mt19937_64 rng(o.seed + B);
        for (auto& id : ids) id = (int32_t)(rng() % (uint64_t)c.vocab_size);
        auto step = [&]() -> Status {
          return gpu_decode_batch(gm, ptrs.data(), ids.data(), B, nullptr, nullptr);
        };
        auto ms = time_runs(step, kDecodeWarmups, o.decode_repeats, gm.stream());
        if (ms.ok()) {
          r.step_ms = median(*ms);
          r.note = variant == "full" ? "KV caches of N random keys/values" : "constant-size caches, random states";
        } else if (is_oom(ms.error())) {
          r.note = "out of memory (step buffers)";
          out_of_memory = true;
          cudaGetLastError();
        } else {
          return std::move(ms).take_error();
        }
        r.peak_used_bytes = (double)(used_now() - std::min(used_now(), used_before));
        std::fprintf(stderr, "bench: %s N=%ld B=%d step %.3f ms (%.0f tok/s), caches %.2f GiB, used %.1f GiB %s\n",
                     variant.c_str(), N, B, r.step_ms, r.step_ms > 0 ? B * 1000.0 / r.step_ms : 0.0,
                     r.cache_bytes / kGiB, r.peak_used_bytes / kGiB, r.note.c_str());
        rows.push_back(r);
        caches.clear();
        GL_CUDA_CHECK(cudaDeviceSynchronize());
      }
    }
  }
  const std::string date = date_now();
  std::ostringstream js, out;
  js << "{\"date\": \"" << date << "\", \"gpu\": \"" << json_escape(prop.name)
     << "\", \"source\": \"" << json_escape(source) << "\", \"layers\": " << c.num_layers
     << ", \"hidden\": " << c.hidden_size << ", \"heads\": " << c.num_heads
     << ", \"kv_heads\": " << c.num_kv_heads << ", \"head_dim\": " << c.head_dim
     << ", \"vocab\": " << c.vocab_size << ", \"sinks\": " << o.sinks << ", \"window\": " << o.window
     << ", \"decode_repeats\": " << o.decode_repeats << ", \"batch_rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const BatchRow& r = rows[i];
    js << (i ? ", " : "") << "{\"model\": \"" << r.model << "\", \"context\": " << r.context
       << ", \"batch\": " << r.batch << ", \"step_ms\": " << r.step_ms
       << ", \"tokens_per_s\": " << (r.step_ms > 0 ? r.batch * 1000.0 / r.step_ms : -1)
       << ", \"cache_bytes\": " << r.cache_bytes << ", \"used_bytes\": " << r.peak_used_bytes
       << ", \"note\": \"" << json_escape(r.note) << "\"}";
  }
  js << "]}\n";
  out << "golinear bench (decode against concurrency) — " << prop.name << ", " << date << "\n";
  out << "model: " << source << "; L=" << c.num_layers << " C=" << c.hidden_size << " H=" << c.num_heads
      << " G=" << c.num_kv_heads << " D=" << c.head_dim << " F=" << c.intermediate_size
      << " V=" << c.vocab_size << "; hybrid = every layer gdn + " << o.sinks << " sinks + "
      << o.window << " window (fresh parameters)\n";
  out << "B sequences at context N each (caches filled at random), one batched decode step for all "
         "(gpu_decode_batch: logits and argmax on the device, not copied out), median of "
      << o.decode_repeats << " after 3; used = cudaMemGetInfo used − used before the model\n\n";
  out << "| model | context | sequences | step ms | aggregate tok/s | caches GiB | GPU used GiB | notes |\n";
  out << "|---|---:|---:|---:|---:|---:|---:|---|\n";
  for (const BatchRow& r : rows)
    out << "| " << (r.model == "hybrid" ? "linearized (hybrid)" : "full attention") << " | "
        << r.context << " | " << r.batch << " | " << (r.step_ms > 0 ? fmt("%.3f", r.step_ms) : "—")
        << " | " << (r.step_ms > 0 ? fmt("%.0f", r.batch * 1000.0 / r.step_ms) : "—") << " | "
        << fmt("%.2f", r.cache_bytes / kGiB) << " | " << fmt("%.1f", r.peak_used_bytes / kGiB)
        << " | " << r.note << " |\n";
  if (!o.json_file.empty()) GL_TRY(write_file(o.json_file, js.str()));
  return o.json ? js.str() : out.str();
}

}  // namespace

Result<std::string> model_bench_run(const ModelBenchOptions& o) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    return make_error("bench: no CUDA device visible (it needs a GPU; this build has the CUDA backend)");
  cudaDeviceProp prop;
  GL_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const size_t used_before = used_now();

  std::unique_ptr<GpuModel> gm;
  std::string source;
  if (!o.config_path.empty()) {
    GL_ASSIGN_OR_RETURN(ModelConfig config, model_config_read(o.config_path));
    GL_ASSIGN_OR_RETURN(gm, gpu_model_random(config, o.seed));
    source = o.config_path + " (random bf16 weights, N(0, 0.02²))";
  } else {
    GL_ASSIGN_OR_RETURN(auto model, model_load(o.model_dir));
    GL_ASSIGN_OR_RETURN(gm, gpu_model_upload(*model));
    source = o.model_dir;
  }
  if (!o.batches.empty()) return batch_bench_run(o, *gm, source, prop, used_before);
  const ModelConfig& c = gm->config();
  cudaStream_t s = gm->stream();

  // Token ids: uniform over the vocabulary, fixed seed.
  const long T_max = *std::max_element(o.contexts.begin(), o.contexts.end());
  std::vector<int32_t> host_ids(std::min(T_max, o.prefill_max));
  std::mt19937_64 rng(o.seed);
  for (auto& id : host_ids) id = (int32_t)(rng() % (uint64_t)c.vocab_size);
  DeviceArena io;
  GL_ASSIGN_OR_RETURN(int32_t * ids, io.alloc<int32_t>(std::max<size_t>(host_ids.size(), 1)));
  GL_ASSIGN_OR_RETURN(float* logits, io.alloc<float>(c.vocab_size));
  GL_CUDA_CHECK(cudaMemcpy(ids, host_ids.data(), host_ids.size() * 4, cudaMemcpyHostToDevice));

  mixers::MixerOptions hybrid_options;  // the default recipe
  hybrid_options.sinks = o.sinks;
  hybrid_options.window = o.window;

  std::vector<Row> rows;
  for (const std::string& variant : o.variants) {
    if (variant == "hybrid") {
      GL_TRY(gm->set_all_hybrid_random(hybrid_options, o.seed));
    } else {
      gm->set_all_softmax();
    }
    std::vector<long> contexts = o.contexts;
    std::sort(contexts.begin(), contexts.end());
    for (long N : contexts) {
      Row r;
      r.model = variant;
      r.context = N;
      r.weights_bytes = (double)gm->weight_bytes();
      size_t peak = used_now();
      // The decode cache first: the prefill fills it (keys/values, or the hybrid cache).
      std::unique_ptr<GpuSequenceCache> cache;
      {
        auto created = GpuSequenceCache::create(*gm, N + 1 + kDecodeWarmups + o.decode_repeats);
        if (created.ok()) {
          cache = std::move(created).value();
          r.cache_bytes = (double)cache->bytes();
        } else if (is_oom(created.error())) {
          const double kv = (double)(N + 1) * c.num_kv_heads * c.head_dim * 2 * 2 * c.num_layers;
          r.decode_note = "out of memory (KV cache " + fmt("%.1f", kv / kGiB) + " GiB)";
          r.cache_bytes = kv;
        } else {
          return std::move(created).take_error();
        }
      }
      peak = std::max(peak, used_now());
      // Prefill: the whole forward of N tokens from position 0, last row's logits.
      const bool run_prefill = N <= o.prefill_max && !(variant == "full" && N > o.full_prefill_max);
      if (!run_prefill) {
        r.prefill_note = variant == "full" && N > o.full_prefill_max
                             ? "not run: O(T²) attention, beyond --full-prefill-max"
                             : "not run: beyond --prefill-max";
      } else {
        const bool short_run = N <= 32768;
        GpuSequenceCache* fill = cache.get();  // the prefill fills the decode cache
        auto once = [&]() -> Status {
          if (fill) GL_TRY(fill->reset());
          GL_TRY(gm->forward_device(ids, (int)N, {.logits = logits, .last_only = true, .cache = fill}));
          return ok_status();
        };
        auto ms = time_runs(once, short_run ? o.warmups : 0, short_run ? o.repeats : 1, s);
        peak = std::max(peak, used_now());
        if (ms.ok()) {
          r.prefill_ms = median(*ms);
          r.prefill_runs = (int)ms->size();
        } else if (is_oom(ms.error())) {
          r.prefill_note = "out of memory";
        } else {
          return std::move(ms).take_error();
        }
        gm->release_scratch();
      }
      // Decode: tokens at positions N, N + 1, ... through gpu_decode_batch (a captured CUDA
      // graph of the whole step) of this one sequence.
      if (cache) {
        if (cache->position() == N) {
          r.decode_note = variant == "full" ? "KV cache from the prefill"
                                            : "constant-size cache from the prefill";
        } else {
          GL_TRY(cache->fill_random(N, o.seed + N));
          r.decode_note = variant == "full" ? "KV cache of N random keys/values (no prefill)"
                                            : "constant-size cache, random state at position N";
        }
        GpuSequenceCache* one = cache.get();
        const int32_t id = (int32_t)(o.seed % (uint64_t)c.vocab_size);
        auto step = [&]() -> Status { return gpu_decode_batch(*gm, &one, &id, 1, nullptr, nullptr); };
        GL_ASSIGN_OR_RETURN(auto ms, time_runs(step, kDecodeWarmups, o.decode_repeats, s));
        r.decode_ms = median(ms);
        r.decode_runs = (int)ms.size();
        peak = std::max(peak, used_now());
      }
      r.peak_used_bytes = (double)(peak - std::min(peak, used_before));
      std::fprintf(stderr, "bench: %s N=%ld prefill %.1f ms, decode %.3f ms, cache %.3f GiB, peak %.1f GiB %s %s\n",
                   variant.c_str(), N, r.prefill_ms, r.decode_ms, r.cache_bytes / kGiB,
                   r.peak_used_bytes / kGiB, r.prefill_note.c_str(), r.decode_note.c_str());
      rows.push_back(r);
      cache.reset();
      GL_CUDA_CHECK(cudaDeviceSynchronize());
    }
  }

  const std::string date = date_now();
  std::ostringstream js, out;
  {
    std::ostringstream& out = js;
    out << "{\"date\": \"" << date << "\", \"gpu\": \"" << json_escape(prop.name)
        << "\", \"source\": \"" << json_escape(source) << "\", \"layers\": " << c.num_layers
        << ", \"hidden\": " << c.hidden_size << ", \"heads\": " << c.num_heads
        << ", \"kv_heads\": " << c.num_kv_heads << ", \"head_dim\": " << c.head_dim
        << ", \"vocab\": " << c.vocab_size << ", \"sinks\": " << o.sinks
        << ", \"window\": " << o.window << ", \"rows\": [";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      out << (i ? ", " : "") << "{\"model\": \"" << r.model << "\", \"context\": " << r.context
          << ", \"prefill_ms\": " << r.prefill_ms << ", \"prefill_tokens_per_s\": "
          << (r.prefill_ms > 0 ? r.context / (r.prefill_ms / 1000.0) : -1)
          << ", \"prefill_runs\": " << r.prefill_runs << ", \"decode_ms\": " << r.decode_ms
          << ", \"decode_tokens_per_s\": " << (r.decode_ms > 0 ? 1000.0 / r.decode_ms : -1)
          << ", \"decode_runs\": " << r.decode_runs << ", \"weights_bytes\": " << r.weights_bytes
          << ", \"cache_bytes\": " << r.cache_bytes << ", \"peak_used_bytes\": "
          << r.peak_used_bytes << ", \"prefill_note\": \"" << json_escape(r.prefill_note)
          << "\", \"decode_note\": \"" << json_escape(r.decode_note) << "\"}";
    }
    out << "]}\n";
  }
  {
    out << "golinear bench (whole model) — " << prop.name << ", " << date << "\n";
    out << "model: " << source << "; L=" << c.num_layers << " C=" << c.hidden_size
        << " H=" << c.num_heads << " G=" << c.num_kv_heads << " D=" << c.head_dim
        << " F=" << c.intermediate_size << " V=" << c.vocab_size << "; hybrid = every layer gdn + "
        << o.sinks << " sinks + " << o.window << " window, gate, conv (fresh parameters)\n";
    out << "prefill: one forward of N tokens from position 0 (last row's logits), median of "
        << o.repeats << " after " << o.warmups
        << " warm-up(s) up to 32K, one run beyond; decode: batch 1, one token at position N, "
           "whole step as one CUDA graph, median of "
        << o.decode_repeats << " after 3; peak = cudaMemGetInfo used − used before the model\n\n";
    out << "| model | context | prefill tok/s | prefill s | decode tok/s | decode ms/token | "
           "weights GiB | cache/state GiB | peak GPU GiB | notes |\n";
    out << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    for (const Row& r : rows) {
      std::string notes = r.prefill_note;
      if (!r.decode_note.empty()) notes += (notes.empty() ? "" : "; ") + r.decode_note;
      out << "| " << (r.model == "hybrid" ? "linearized (hybrid)" : "full attention") << " | "
          << r.context << " | "
          << (r.prefill_ms > 0 ? fmt("%.0f", r.context / (r.prefill_ms / 1000.0)) : "—") << " | "
          << (r.prefill_ms > 0 ? fmt("%.3f", r.prefill_ms / 1000.0) : "—") << " | "
          << (r.decode_ms > 0 ? fmt("%.1f", 1000.0 / r.decode_ms) : "—") << " | "
          << (r.decode_ms > 0 ? fmt("%.3f", r.decode_ms) : "—") << " | "
          << fmt("%.2f", r.weights_bytes / kGiB) << " | " << fmt("%.3f", r.cache_bytes / kGiB)
          << " | " << fmt("%.1f", r.peak_used_bytes / kGiB) << " | " << notes << " |\n";
    }
  }
  if (!o.json_file.empty()) GL_TRY(write_file(o.json_file, js.str()));
  return o.json ? js.str() : out.str();
}

}  // namespace golinear::bench::cuda
