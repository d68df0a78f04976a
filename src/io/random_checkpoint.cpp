#include "io/random_checkpoint.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <map>
#include <vector>

#include "common/file.h"
#include "common/json.h"
#include "io/checkpoint.h"
#include "io/config.h"
#include "io/safetensors.h"

namespace golinear {

namespace {

namespace fs = std::filesystem;

constexpr size_t kChunkElements = size_t(1) << 24;  // 16 M values (32 MB of bf16) per buffer

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The key of one tensor's values: the seed and the tensor's name (FNV-1a), mixed.
uint64_t tensor_key(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001b3ull;
  return splitmix64(splitmix64(seed) ^ h);
}

enum class Fill { normal, ones };

// Elements [begin, begin + n) of a tensor (key) into out (bf16 bits). Normal values come in
// Box–Muller pairs: pair p (elements 2p, 2p+1) from the hash of (key, p) alone.
void fill_chunk(uint64_t key, Fill fill, float stddev, size_t begin, size_t n, uint16_t* out) {
  if (fill == Fill::ones) {
    const uint16_t one = f32_to_bf16(1.0f);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < (long)n; ++i) out[i] = one;
    return;
  }
  const size_t first_pair = begin / 2, last_pair = (begin + n + 1) / 2;  // [first, last)
  const double two_pi = 6.283185307179586;
#pragma omp parallel for schedule(static)
  for (long p = (long)first_pair; p < (long)last_pair; ++p) {
    const uint64_t bits = splitmix64(key ^ splitmix64((uint64_t)p));
    const double u1 = ((double)(bits >> 40) + 0.5) / 16777216.0;               // (0, 1), 24 bits
    const double u2 = (double)((bits >> 16) & 0xffffff) / 16777216.0;           // [0, 1)
    const double r = stddev * std::sqrt(-2.0 * std::log(u1));
    const size_t i0 = 2 * (size_t)p, i1 = i0 + 1;
    if (i0 >= begin && i0 < begin + n) out[i0 - begin] = f32_to_bf16((float)(r * std::cos(two_pi * u2)));
    if (i1 >= begin && i1 < begin + n) out[i1 - begin] = f32_to_bf16((float)(r * std::sin(two_pi * u2)));
  }
}

Fill fill_of(TensorRole role) {
  switch (role) {
    case TensorRole::input_norm: case TensorRole::post_norm: case TensorRole::final_norm:
    case TensorRole::q_norm: case TensorRole::k_norm:
      return Fill::ones;
    default:
      return Fill::normal;  // matrices and biases
  }
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// The tokenizer files to copy: tokenizer.json, and tokenizer_config.json when `source` is a
// directory that has one.
Result<std::vector<std::string>> tokenizer_files(const std::string& source) {
  std::error_code ec;
  if (fs::is_directory(source, ec)) {
    const std::string json = source + "/tokenizer.json";
    if (!file_exists(json)) return make_error(source, ": no tokenizer.json in this directory");
    std::vector<std::string> files = {json};
    if (file_exists(source + "/tokenizer_config.json")) files.push_back(source + "/tokenizer_config.json");
    return files;
  }
  if (!file_exists(source)) return make_error(source, ": tokenizer file does not exist");
  if (fs::path(source).filename() != "tokenizer.json")
    return make_error(source, ": the tokenizer must be a file named tokenizer.json or a directory holding one");
  return std::vector<std::string>{source};
}

Status copy_into(const std::string& file, const std::string& dir) {
  std::error_code ec;
  const fs::path target = fs::path(dir) / fs::path(file).filename();
  fs::copy_file(file, target, fs::copy_options::overwrite_existing, ec);
  if (ec) return make_error(target.string(), ": cannot copy from ", file, " (", ec.message(), ")");
  return ok_status();
}

// Generates and writes one tensor's values through two alternating buffers: the next chunk is
// generated while the previous one is written.
Status write_tensor(SafetensorsStreamWriter& writer, const TensorSpec& t, uint64_t seed,
                    std::vector<uint16_t> (&buffers)[2], uint64_t* written,
                    const std::function<void(uint64_t)>& on_chunk) {
  const size_t n = (size_t)numel_of(t.shape);
  const uint64_t key = tensor_key(seed, t.name);
  const Fill fill = fill_of(t.role);
  std::future<Status> pending;
  int which = 0;
  for (size_t begin = 0; begin < n; begin += kChunkElements, which ^= 1) {
    const size_t count = std::min(kChunkElements, n - begin);
    std::vector<uint16_t>& buffer = buffers[which];
    buffer.resize(count);
    fill_chunk(key, fill, 0.02f, begin, count, buffer.data());
    if (pending.valid()) GL_TRY(pending.get());
    pending = std::async(std::launch::async, [&writer, &buffer, count, written, &on_chunk] {
      Status st = writer.append(buffer.data(), count * sizeof(uint16_t));
      if (st.ok()) {
        *written += count * sizeof(uint16_t);
        if (on_chunk) on_chunk(*written);
      }
      return st;
    });
  }
  if (pending.valid()) GL_TRY(pending.get());
  return ok_status();
}

}  // namespace

Result<uint64_t> byte_size_parse(const std::string& text, const std::string& what) {
  size_t digits = 0;
  while (digits < text.size() && (std::isdigit((unsigned char)text[digits]) || text[digits] == '.'))
    ++digits;
  const std::string number = text.substr(0, digits), unit = text.substr(digits);
  static const std::map<std::string, double> kUnits = {
      {"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
  auto it = kUnits.find(unit);
  char* end = nullptr;
  const double value = number.empty() ? -1 : std::strtod(number.c_str(), &end);
  if (it == kUnits.end() || value <= 0 || end != number.c_str() + number.size())
    return make_error(what, ": '", text, "' is not a size (e.g. 5GB, 500MB, 2GiB, 4096)");
  return (uint64_t)(value * it->second);
}

Result<RandomCheckpointSummary> random_checkpoint_write(
    const RandomCheckpointOptions& options,
    const std::function<void(uint64_t, uint64_t)>& on_bytes) {
  const auto start = std::chrono::steady_clock::now();
  GL_ASSIGN_OR_RETURN(ModelConfig config, model_config_read(options.config_path));
  GL_ASSIGN_OR_RETURN(std::vector<std::string> tokenizer, tokenizer_files(options.tokenizer));
  if (options.max_shard_bytes == 0) return make_error("max shard size must be positive");
  std::error_code ec;
  if (options.out.empty()) return make_error("random checkpoint: no output directory");
  if (fs::exists(options.out, ec))
    return make_error(options.out, ": already exists (random-checkpoint writes a new directory)");
  const std::string partial = options.out + ".partial";
  fs::remove_all(partial, ec);  // what an interrupted run left
  fs::create_directories(partial, ec);
  if (ec) return make_error(partial, ": cannot create directory (", ec.message(), ")");

  GL_TRY(copy_into(options.config_path, partial));
  if (fs::path(options.config_path).filename() != "config.json") {
    fs::rename(fs::path(partial) / fs::path(options.config_path).filename(),
               fs::path(partial) / "config.json", ec);
    if (ec) return make_error(partial, "/config.json: cannot write (", ec.message(), ")");
  }
  for (const std::string& file : tokenizer) GL_TRY(copy_into(file, partial));

  // Shards as the Hub cuts them: tensors in order, a new shard when the next tensor would pass
  // the limit (a tensor larger than the limit gets a shard of its own).
  const std::vector<TensorSpec> specs = checkpoint_tensor_specs(config);
  std::vector<std::vector<const TensorSpec*>> shards;
  uint64_t shard_bytes = 0, total_bytes = 0;
  RandomCheckpointSummary summary;
  for (const TensorSpec& t : specs) {
    const uint64_t bytes = (uint64_t)numel_of(t.shape) * 2;
    if (shards.empty() || (shard_bytes > 0 && shard_bytes + bytes > options.max_shard_bytes)) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(&t);
    shard_bytes += bytes;
    total_bytes += bytes;
    summary.parameters += (long)numel_of(t.shape);
  }
  const int count = (int)shards.size();
  auto shard_name = [count](int i) {
    if (count == 1) return std::string("model.safetensors");
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", i + 1, count);
    return std::string(name);
  };

  std::vector<uint16_t> buffers[2];
  uint64_t written = 0;
  Json weight_map = Json::object();
  std::function<void(uint64_t)> on_chunk;
  if (on_bytes) on_chunk = [&](uint64_t done) { on_bytes(done, total_bytes); };
  for (int i = 0; i < count; ++i) {
    std::vector<SafetensorsStreamWriter::Entry> entries;
    for (const TensorSpec* t : shards[i]) {
      entries.push_back({t->name, DType::BF16, t->shape});
      weight_map[t->name] = shard_name(i);
    }
    GL_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsStreamWriter> writer,
                        SafetensorsStreamWriter::create(partial + "/" + shard_name(i), entries,
                                                        {{"format", "pt"}}));
    for (const TensorSpec* t : shards[i])
      GL_TRY(write_tensor(*writer, *t, options.seed, buffers, &written, on_chunk));
    GL_TRY(writer->finish());
  }
  if (count > 1) {
    Json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
    GL_TRY(file_write_atomic(partial + "/model.safetensors.index.json", index.dump(2) + "\n"));
  }
  fs::rename(partial, options.out, ec);
  if (ec) return make_error(options.out, ": cannot rename ", partial, " into place (", ec.message(), ")");
  summary.shards = count;
  summary.tensors = (long)specs.size();
  summary.total_bytes = total_bytes;
  summary.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace golinear
