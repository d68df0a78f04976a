// gpu_model_load (gpu_model_load.h): every tensor of io/checkpoint.h's table, read from its
// mapped shard a chunk at a time into one of two pinned staging buffers (converted to bf16 on
// the way when stored f16/f32), copied asynchronously to its place in the device weights while
// the next chunk is staged; the mapped pages are dropped once staged, so the host resident set
// stays at the staging size however large the model is.
#include "model/cuda/gpu_model_load.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/linearization.h"

namespace golinear::model::cuda {

namespace {

constexpr size_t kStagingBytes = size_t(32) << 20;  // per buffer; two buffers

// Two pinned host buffers used in turn, each with the event of the copy that last read it.
class Staging {
 public:
  ~Staging() {  // nothing to report from a destructor
    for (int i = 0; i < 2; ++i) {
      if (done_[i]) {
        (void)cudaEventSynchronize(done_[i]);  // no copy may still read the buffer
        (void)cudaEventDestroy(done_[i]);
      }
      if (buffer_[i]) (void)cudaFreeHost(buffer_[i]);
    }
  }
  Status init() {
    for (int i = 0; i < 2; ++i) {
      GL_CUDA_CHECK(cudaMallocHost(&buffer_[i], kStagingBytes));
      GL_CUDA_CHECK(cudaEventCreateWithFlags(&done_[i], cudaEventDisableTiming));
    }
    return ok_status();
  }
  // The next free buffer (waits for the copy that last read it).
  Result<uint8_t*> next() {
    which_ ^= 1;
    GL_CUDA_CHECK(cudaEventSynchronize(done_[which_]));
    return static_cast<uint8_t*>(buffer_[which_]);
  }
  // Copies `bytes` of the current buffer to `dst` on `stream`, asynchronously.
  Status send(void* dst, size_t bytes, cudaStream_t stream) {
    GL_CUDA_CHECK(cudaMemcpyAsync(dst, buffer_[which_], bytes, cudaMemcpyHostToDevice, stream));
    GL_CUDA_CHECK(cudaEventRecord(done_[which_], stream));
    return ok_status();
  }

 private:
  void* buffer_[2] = {nullptr, nullptr};
  cudaEvent_t done_[2] = {nullptr, nullptr};
  int which_ = 1;
};

// Stored bf16/f16/f32 values [begin, begin + n) of `t` → bf16 bits in `out`.
void convert_to_bf16(const TensorView& t, size_t begin, size_t n, uint16_t* out) {
  switch (t.dtype) {
    case DType::BF16:
      std::memcpy(out, t.data + 2 * begin, 2 * n);
      return;
    case DType::F16:
#pragma omp parallel for schedule(static)
      for (long i = 0; i < (long)n; ++i) {
        uint16_t bits;
        std::memcpy(&bits, t.data + 2 * (begin + i), 2);
        out[i] = f32_to_bf16(f16_to_f32(bits));
      }
      return;
    default: {  // F32 (checked by the caller)
#pragma omp parallel for schedule(static)
      for (long i = 0; i < (long)n; ++i) {
        float x;
        std::memcpy(&x, t.data + 4 * (begin + i), 4);
        out[i] = f32_to_bf16(x);
      }
      return;
    }
  }
}

// The tensor `t` (of `file`) as bf16 at `dst` (device), through the staging buffers.
Status stream_bf16(const CheckpointTensor& t, bf16* dst, Staging& staging, cudaStream_t stream,
                   GpuLoadStats* stats) {
  const TensorView& v = *t.view;
  if (v.dtype != DType::BF16 && v.dtype != DType::F16 && v.dtype != DType::F32)
    return make_error(t.file->path(), ": tensor '", v.name, "' has dtype ", dtype_name(v.dtype),
                      ", expected BF16, F16 or F32");
  const size_t n = (size_t)v.numel(), chunk = kStagingBytes / sizeof(uint16_t);
  const size_t element_bytes = dtype_size(v.dtype);
  for (size_t begin = 0; begin < n; begin += chunk) {
    const size_t count = std::min(chunk, n - begin);
    GL_ASSIGN_OR_RETURN(uint8_t * host, staging.next());
    convert_to_bf16(v, begin, count, reinterpret_cast<uint16_t*>(host));
    t.file->release(v.data + begin * element_bytes, count * element_bytes);
    GL_TRY(staging.send(dst + begin, count * sizeof(bf16), stream));
    stats->bytes_uploaded += count * sizeof(bf16);
  }
  return ok_status();
}

}  // namespace

Result<size_t> gpu_memory_in_use() {
  size_t free = 0, total = 0;
  GL_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return total - free;
}

Result<std::unique_ptr<GpuModel>> gpu_model_load(const std::string& dir, const Model& skeleton,
                                                 GpuLoadStats* stats_out) {
  const auto start = std::chrono::steady_clock::now();
  const ModelConfig& c = skeleton.config;
  if ((int)skeleton.mixers.size() != c.num_layers)
    return make_error("gpu model: the model has ", skeleton.mixers.size(), " mixers for ",
                      c.num_layers, " layers");
  GL_ASSIGN_OR_RETURN(ModelDirectory where, model_directory_resolve(dir));  // an adapter: its base
  GL_ASSIGN_OR_RETURN(CheckpointWeights weights, CheckpointWeights::open(where.base));
  auto gm = std::make_unique<GpuModel>();
  GL_TRY(gm->init(c));
  cudaStream_t s = gm->stream_;
  DeviceArena& a = gm->weights_;
  Staging staging;
  GL_TRY(staging.init());
  GpuLoadStats stats;
  stats.peak_staging_bytes = 2 * kStagingBytes;

  // The stacked matrices are allocated whole; their parts land at their row offsets.
  const size_t C = c.hidden_size, F = c.intermediate_size, V = c.vocab_size, D = c.head_dim;
  const size_t QD = (size_t)c.num_heads * D, KD = (size_t)c.num_kv_heads * D;
  const size_t QKV = QD + 2 * KD;
  GL_ASSIGN_OR_RETURN(gm->embed_, a.alloc<bf16>(V * C));
  gm->lm_head_ = gm->embed_;
  if (!c.tie_word_embeddings) { GL_ASSIGN_OR_RETURN(gm->lm_head_, a.alloc<bf16>(V * C)); }
  for (int l = 0; l < c.num_layers; ++l) {
    GpuLayer& L = gm->layers_[l];
    GL_ASSIGN_OR_RETURN(L.w_qkv, a.alloc<bf16>(QKV * C));
    GL_ASSIGN_OR_RETURN(L.w_o, a.alloc<bf16>(C * QD));
    GL_ASSIGN_OR_RETURN(L.w_gate_up, a.alloc<bf16>(2 * F * C));
    GL_ASSIGN_OR_RETURN(L.w_down, a.alloc<bf16>(C * F));
    if (c.qkv_bias) { GL_ASSIGN_OR_RETURN(L.b_qkv, a.alloc<float>(QKV)); }
  }

  for (const TensorSpec& spec : checkpoint_tensor_specs(c)) {
    GL_ASSIGN_OR_RETURN(CheckpointTensor t, weights.find(spec.name, spec.shape));
    ++stats.tensors;
    GpuLayer* L = spec.layer >= 0 ? &gm->layers_[spec.layer] : nullptr;
    if (tensor_role_is_vector(spec.role)) {  // fp32 on the device, small
      std::vector<float> host((size_t)t.view->numel());
      GL_TRY(tensor_to_f32(*t.view, host.data(), t.file->path()));
      stats.peak_staging_bytes = std::max(stats.peak_staging_bytes,
                                          2 * kStagingBytes + host.size() * sizeof(float));
      stats.bytes_uploaded += host.size() * sizeof(float);
      float* into_bias = nullptr;  // q/k/v biases go into the stacked b_qkv
      switch (spec.role) {
        case TensorRole::q_bias: into_bias = L->b_qkv; break;
        case TensorRole::k_bias: into_bias = L->b_qkv + QD; break;
        case TensorRole::v_bias: into_bias = L->b_qkv + QD + KD; break;
        default: break;
      }
      if (into_bias) {
        GL_CUDA_CHECK(cudaMemcpyAsync(into_bias, host.data(), host.size() * sizeof(float),
                                      cudaMemcpyHostToDevice, s));
        GL_CUDA_CHECK(cudaStreamSynchronize(s));  // `host` is a temporary
        continue;
      }
      GL_ASSIGN_OR_RETURN(float* device, upload_f32(a, host, s));
      switch (spec.role) {
        case TensorRole::final_norm: gm->final_norm_ = device; break;
        case TensorRole::input_norm: L->input_norm = device; break;
        case TensorRole::post_norm: L->post_norm = device; break;
        case TensorRole::q_norm: L->q_norm = device; break;
        case TensorRole::k_norm: L->k_norm = device; break;
        case TensorRole::o_bias: L->b_o = device; break;
        default: return make_error("gpu model: tensor '", spec.name, "' has no fp32 place");
      }
      continue;
    }
    bf16* dst = nullptr;
    switch (spec.role) {
      case TensorRole::embed: dst = gm->embed_; break;
      case TensorRole::lm_head: dst = gm->lm_head_; break;
      case TensorRole::q_proj: dst = L->w_qkv; break;
      case TensorRole::k_proj: dst = L->w_qkv + QD * C; break;
      case TensorRole::v_proj: dst = L->w_qkv + (QD + KD) * C; break;
      case TensorRole::o_proj: dst = L->w_o; break;
      case TensorRole::gate_proj: dst = L->w_gate_up; break;
      case TensorRole::up_proj: dst = L->w_gate_up + F * C; break;
      case TensorRole::down_proj: dst = L->w_down; break;
      default: return make_error("gpu model: tensor '", spec.name, "' has no bf16 place");
    }
    GL_TRY(stream_bf16(t, dst, staging, s, &stats));
  }
  GL_CUDA_CHECK(cudaStreamSynchronize(s));
  for (int l = 0; l < c.num_layers; ++l) GL_TRY(gm->set_layer_mixer(l, *skeleton.mixers[l]));
  GL_TRY(gm->set_lora(skeleton.lora));  // unmerged (model/cuda/lora.h)
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (stats_out) *stats_out = stats;
  return gm;
}

}  // namespace golinear::model::cuda
