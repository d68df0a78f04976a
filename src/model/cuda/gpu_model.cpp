// The transformer on one GPU (gpu_model.h). Mirrors model/transformer.cpp's forward_tokens:
//   embed → [RMSNorm → [q;k;v] GEMM (+bias, +q/k norm) → mixer → h += y·W_oᵀ → RMSNorm →
//            [gate;up] GEMM → SwiGLU → h += act·W_downᵀ] × L → RMSNorm → lm_head
// with the residual stream h in fp32 and every other activation bf16. The per-token stages run
// over row chunks (bounded scratch at 1M tokens); the mixer sees the whole sequence.
#include "model/cuda/gpu_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/model_ops.h"
#include "mixers/hybrid_mixer.h"

namespace golinear::cuda {

namespace kc = kernels::cuda;

namespace {

constexpr int kRowChunk = 16384;  // rows of the per-token stages per pass

#define GL_CUBLAS_OK(expr)                                                             \
  do {                                                                                 \
    if ((expr) != CUBLAS_STATUS_SUCCESS)                                               \
      return make_error("cuBLAS call failed: ", #expr, " at ", __FILE__, ":", __LINE__); \
  } while (0)

template <class T>
Result<T*> upload(DeviceArena& arena, const T* host, size_t n, cudaStream_t stream) {
  GL_ASSIGN_OR_RETURN(T * p, arena.alloc<T>(n));
  GL_CUDA_CHECK(cudaMemcpyAsync(p, host, n * sizeof(T), cudaMemcpyHostToDevice, stream));
  GL_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host vector may be a temporary
  return p;
}

Status check_head_dim(int D) {
  if (D != 64 && D != 128)
    return make_error("gpu model: head_dim ", D,
                      " is not supported by the CUDA attention kernels (64 or 128)");
  return ok_status();
}

// The CUDA hybrid kernels implement the default recipe only.
Status check_hybrid_options(const mixers::MixerOptions& o, int layer) {
  if (o.kind != mixers::MixerKind::gdn || o.mix != mixers::MixKind::gate || !o.conv ||
      o.linear_rope || o.window < 1 || o.sinks + o.window > 256)
    return make_error("gpu model: layer ", layer, " uses mixer ", mixers::to_string(o.kind),
                      " (mix ", mixers::to_string(o.mix), ", conv ", o.conv ? "on" : "off",
                      ", linear rope ", o.linear_rope ? "on" : "off", ", sinks ", o.sinks,
                      ", window ", o.window,
                      "): the CUDA hybrid kernels implement only the default recipe (gdn, mix "
                      "gate, conv on, linear rope off, 1 ≤ window, sinks + window ≤ 256)");
  return ok_status();
}

}  // namespace

Result<bf16*> upload_bf16(DeviceArena& arena, const std::vector<const std::vector<float>*>& parts,
                          cudaStream_t stream) {
  std::vector<bf16> b;
  for (const auto* p : parts)
    for (float x : *p) b.push_back(__float2bfloat16(x));
  return upload(arena, b.data(), b.size(), stream);
}

Result<float*> upload_f32(DeviceArena& arena, const std::vector<float>& x, cudaStream_t stream) {
  if (x.empty()) return static_cast<float*>(nullptr);
  return upload(arena, x.data(), x.size(), stream);
}

// ---- DeviceArena ------------------------------------------------------------------------------

Result<void*> DeviceArena::alloc_bytes(size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 1));
  if (e != cudaSuccess) {
    cudaGetLastError();  // an out-of-memory is not sticky: clear it
    return make_error("out of GPU memory: cudaMalloc of ", bytes, " bytes failed (",
                      cudaGetErrorString(e), ")");
  }
  blocks_.push_back(p);
  bytes_ += bytes;
  return p;
}

void DeviceArena::clear() {
  for (void* p : blocks_) cudaFree(p);
  blocks_.clear();
  bytes_ = 0;
}

// ---- GpuModel -----------------------------------------------------------------------------------

GpuModel::~GpuModel() {
  for (int i = 0; i < 2; ++i) {  // nothing to report from a destructor
    if (pinned_ids_[i]) cudaFreeHost(pinned_ids_[i]);
    if (ids_copied_[i]) cudaEventDestroy(ids_copied_[i]);
  }
  trace_alt_memory_.clear();
  scratch_.clear();
  layers_.clear();
  if (cublas_) {
    kc::gemm_release_workspace(cublas_);
    cublasDestroy(cublas_);
  }
  weights_.clear();  // after the handle that used its workspace
  if (stream_) cudaStreamDestroy(stream_);
}

Status GpuModel::init(const ModelConfig& config) {
  config_ = config;
  GL_TRY(check_head_dim(config.head_dim));
  if (config.num_kv_heads <= 0 || config.num_heads % config.num_kv_heads != 0)
    return make_error("gpu model: kv heads must divide heads");
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    return make_error("gpu model: no CUDA device visible");
  }
  GL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  GL_CUBLAS_OK(cublasCreate(&cublas_));
  GL_CUBLAS_OK(cublasSetStream(cublas_, stream_));
  // A workspace of its own (kernels/cuda/gemm.h): graph-capture safe, and deterministic while
  // other streams run (the pipelined attention transfer).
  GL_ASSIGN_OR_RETURN(void* ws, weights_.alloc_bytes(kc::kCublasWorkspaceBytes));
  GL_TRY(kc::gemm_use_workspace(cublas_, ws, kc::kCublasWorkspaceBytes));
  const std::vector<float> inv = rope_inverse_frequencies(config.rope, config.head_dim);
  GL_ASSIGN_OR_RETURN(inv_freq_, upload_f32(weights_, inv, stream_));
  layers_.resize(config.num_layers);
  return ok_status();
}

size_t GpuModel::weight_bytes() const {
  size_t total = weights_.bytes() - kc::kCublasWorkspaceBytes;
  for (const GpuLayer& l : layers_)
    if (l.mixer_memory) total += l.mixer_memory->bytes();
  return total;
}

bool GpuModel::has_hybrid_layers() const {
  return std::any_of(layers_.begin(), layers_.end(), [](const GpuLayer& l) { return l.hybrid; });
}
bool GpuModel::has_softmax_layers() const {
  return std::any_of(layers_.begin(), layers_.end(), [](const GpuLayer& l) { return !l.hybrid; });
}

void GpuModel::set_all_softmax() {
  release_scratch();  // the scratch depends on the mixers (RoPE copies, hybrid workspace)
  for (GpuLayer& l : layers_) {
    l.hybrid = false;
    l.mixer_memory.reset();
  }
}

Status GpuModel::set_all_hybrid_random(const mixers::MixerOptions& o, uint64_t seed) {
  const ModelConfig& c = config_;
  const int C = c.hidden_size, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim;
  release_scratch();  // the scratch depends on the mixers (RoPE copies, hybrid workspace)
  for (int l = 0; l < c.num_layers; ++l) {
    GL_TRY(check_hybrid_options(o, l));
    GpuLayer& L = layers_[l];
    L.mixer_memory = std::make_unique<DeviceArena>();
    DeviceArena& a = *L.mixer_memory;
    // Host-side init of the small tensors, as mixers/hybrid_mixer.h describes.
    std::mt19937_64 rng(seed + l);
    std::uniform_real_distribution<double> u01(0.0, 1.0);
    std::vector<float> A_log(H), dt_bias(H), b_beta(H, 0.0f), b_lambda(H, -2.0f);
    for (int h = 0; h < H; ++h) A_log[h] = (float)std::log(1.0 + 15.0 * u01(rng));
    for (int h = 0; h < H; ++h) {
      double dt = std::exp(std::log(1e-3) + (std::log(1e-1) - std::log(1e-3)) * u01(rng));
      dt = std::max(dt, 1e-4);
      dt_bias[h] = (float)(dt + std::log(-std::expm1(-dt)));
    }
    auto conv_identity = [](int rows) {
      std::vector<float> w((size_t)rows * 4, 0.0f);
      for (int r = 0; r < rows; ++r) w[(size_t)r * 4 + 3] = 1.0f;
      return w;
    };
    HybridParams& p = L.hparams;
    GL_ASSIGN_OR_RETURN(float* cq, upload_f32(a, conv_identity(H * D), stream_));
    GL_ASSIGN_OR_RETURN(float* ck, upload_f32(a, conv_identity(G * D), stream_));
    GL_ASSIGN_OR_RETURN(float* cv, upload_f32(a, conv_identity(G * D), stream_));
    GL_ASSIGN_OR_RETURN(bf16 * wg, a.alloc<bf16>((size_t)3 * H * C));
    GL_TRY(kc::fill_normal_bf16(wg, (size_t)3 * H * C, seed * 7919 + l, 0.02f, stream_));
    GL_ASSIGN_OR_RETURN(float* bb, upload_f32(a, b_beta, stream_));
    GL_ASSIGN_OR_RETURN(float* al, upload_f32(a, A_log, stream_));
    GL_ASSIGN_OR_RETURN(float* db, upload_f32(a, dt_bias, stream_));
    GL_ASSIGN_OR_RETURN(float* bl, upload_f32(a, b_lambda, stream_));
    p = HybridParams{cq, ck, cv, wg, bb, al, db, bl, inv_freq_};
    L.hshape = HybridShape{C, H, G, D, o.sinks, o.window};
    L.hybrid = true;
  }
  GL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return ok_status();
}

Status upload_layer_weights(DeviceArena& a, const LayerWeights& w, const ModelConfig& c,
                            cudaStream_t s, GpuLayerWeights* L) {
  GL_ASSIGN_OR_RETURN(L->input_norm, upload_f32(a, w.input_norm, s));
  GL_ASSIGN_OR_RETURN(L->post_norm, upload_f32(a, w.post_norm, s));
  GL_ASSIGN_OR_RETURN(L->w_qkv, upload_bf16(a, {&w.q_proj, &w.k_proj, &w.v_proj}, s));
  if (!w.q_bias.empty()) {
    std::vector<float> b = w.q_bias;
    b.insert(b.end(), w.k_bias.begin(), w.k_bias.end());
    b.insert(b.end(), w.v_bias.begin(), w.v_bias.end());
    if (b.size() != (size_t)(c.num_heads + 2 * c.num_kv_heads) * c.head_dim)
      return make_error("gpu model: qkv bias shape");
    GL_ASSIGN_OR_RETURN(L->b_qkv, upload_f32(a, b, s));
  }
  if (!w.q_norm.empty()) {
    GL_ASSIGN_OR_RETURN(L->q_norm, upload_f32(a, w.q_norm, s));
    GL_ASSIGN_OR_RETURN(L->k_norm, upload_f32(a, w.k_norm, s));
  }
  GL_ASSIGN_OR_RETURN(L->w_o, upload_bf16(a, {&w.o_proj}, s));
  if (!w.o_bias.empty()) { GL_ASSIGN_OR_RETURN(L->b_o, upload_f32(a, w.o_bias, s)); }
  GL_ASSIGN_OR_RETURN(L->w_gate_up, upload_bf16(a, {&w.gate_proj, &w.up_proj}, s));
  GL_ASSIGN_OR_RETURN(L->w_down, upload_bf16(a, {&w.down_proj}, s));
  return ok_status();
}

Status upload_layer_mixer(const mixers::Mixer& mixer, int l, const ModelConfig& c,
                          const float* inv_freq, cudaStream_t s, GpuLayer* layer) {
  const int C = c.hidden_size, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim;
  GpuLayer& L = *layer;
  if (mixer.kind() == "softmax") return ok_status();
  const auto* hm = dynamic_cast<const mixers::HybridMixer*>(&mixer);
  if (!hm) return make_error("gpu model: layer ", l, " has mixer '", mixer.kind(), "' with no GPU form");
  GL_TRY(check_hybrid_options(hm->options(), l));
  L.mixer_memory = std::make_unique<DeviceArena>();
  DeviceArena& m = *L.mixer_memory;
  std::vector<float> w_a, w_b, w_lambda;
  HybridParams p;
  p.inv_freq = inv_freq;
  for (mixers::Parameter* prm : const_cast<mixers::Mixer&>(mixer).parameters()) {
    const std::string& n = prm->name;
    auto put = [&](const float** slot) -> Status {
      GL_ASSIGN_OR_RETURN(float* d, upload_f32(m, prm->value, s));
      *slot = d;
      return ok_status();
    };
    if (n == "conv_q") GL_TRY(put(&p.conv_q));
    else if (n == "conv_k") GL_TRY(put(&p.conv_k));
    else if (n == "conv_v") GL_TRY(put(&p.conv_v));
    else if (n == "b_beta") GL_TRY(put(&p.b_beta));
    else if (n == "A_log") GL_TRY(put(&p.A_log));
    else if (n == "dt_bias") GL_TRY(put(&p.dt_bias));
    else if (n == "b_lambda") GL_TRY(put(&p.b_lambda));
    else if (n == "w_a") w_a = prm->value;
    else if (n == "w_b") w_b = prm->value;
    else if (n == "w_lambda") w_lambda = prm->value;
    else return make_error("gpu model: layer ", l, ": unexpected hybrid parameter '", n, "'");
  }
  const size_t hc = (size_t)H * C;
  if (w_a.size() != hc || w_b.size() != hc || w_lambda.size() != hc || !p.conv_q || !p.conv_k ||
      !p.conv_v || !p.b_beta || !p.A_log || !p.dt_bias || !p.b_lambda)
    return make_error("gpu model: layer ", l, ": the hybrid mixer lacks a default-recipe parameter");
  GL_ASSIGN_OR_RETURN(bf16 * wg, upload_bf16(m, {&w_a, &w_b, &w_lambda}, s));
  p.w_gates = wg;
  L.hparams = p;
  L.hshape = HybridShape{C, H, G, D, hm->options().sinks, hm->options().window};
  L.hybrid = true;
  return ok_status();
}

Result<std::unique_ptr<GpuModel>> gpu_model_upload(const Model& model) {
  if (!model.has_backbone())
    return make_error("gpu model: the model was loaded without its backbone weights (gpu_model_load reads them)");
  auto gm = std::make_unique<GpuModel>();
  GL_TRY(gm->init(model.config));
  const ModelConfig& c = model.config;
  cudaStream_t s = gm->stream_;
  DeviceArena& a = gm->weights_;
  GL_ASSIGN_OR_RETURN(gm->embed_, upload_bf16(a, {&model.embed}, s));
  if (model.lm_head.empty()) {
    gm->lm_head_ = gm->embed_;
  } else {
    GL_ASSIGN_OR_RETURN(gm->lm_head_, upload_bf16(a, {&model.lm_head}, s));
  }
  GL_ASSIGN_OR_RETURN(gm->final_norm_, upload_f32(a, model.final_norm, s));
  if ((int)model.mixers.size() != c.num_layers)
    return make_error("gpu model: the model has ", model.mixers.size(), " mixers for ",
                      c.num_layers, " layers");
  for (int l = 0; l < c.num_layers; ++l) {
    GpuLayer& L = gm->layers_[l];
    GL_TRY(upload_layer_weights(a, model.layers[l], c, s, &L));
    GL_TRY(upload_layer_mixer(*model.mixers[l], l, c, gm->inv_freq_, s, &L));
  }
  return gm;
}

Result<std::unique_ptr<GpuModel>> gpu_model_random(const ModelConfig& c, uint64_t seed) {
  auto gm = std::make_unique<GpuModel>();
  GL_TRY(gm->init(c));
  const size_t C = c.hidden_size, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim,
               F = c.intermediate_size, V = c.vocab_size;
  cudaStream_t s = gm->stream_;
  DeviceArena& a = gm->weights_;
  uint64_t next_seed = seed * 1000003ull;
  auto matrix = [&](size_t n) -> Result<bf16*> {
    GL_ASSIGN_OR_RETURN(bf16 * p, a.alloc<bf16>(n));
    GL_TRY(kc::fill_normal_bf16(p, n, ++next_seed, 0.02f, s));
    return p;
  };
  auto ones = [&](size_t n) -> Result<float*> {
    GL_ASSIGN_OR_RETURN(float* p, a.alloc<float>(n));
    GL_TRY(kc::fill_const_f32(p, n, 1.0f, s));
    return p;
  };
  auto small = [&](size_t n) -> Result<float*> {
    GL_ASSIGN_OR_RETURN(float* p, a.alloc<float>(n));
    GL_TRY(kc::fill_uniform_f32(p, n, ++next_seed, -0.02f, 0.02f, s));
    return p;
  };
  GL_ASSIGN_OR_RETURN(gm->embed_, matrix(V * C));
  if (c.tie_word_embeddings) {
    gm->lm_head_ = gm->embed_;
  } else {
    GL_ASSIGN_OR_RETURN(gm->lm_head_, matrix(V * C));
  }
  GL_ASSIGN_OR_RETURN(gm->final_norm_, ones(C));
  for (int l = 0; l < c.num_layers; ++l) {
    GpuLayer& L = gm->layers_[l];
    GL_ASSIGN_OR_RETURN(L.input_norm, ones(C));
    GL_ASSIGN_OR_RETURN(L.post_norm, ones(C));
    GL_ASSIGN_OR_RETURN(L.w_qkv, matrix((H + 2 * G) * D * C));
    if (c.qkv_bias) { GL_ASSIGN_OR_RETURN(L.b_qkv, small((H + 2 * G) * D)); }
    if (c.qk_norm) {
      GL_ASSIGN_OR_RETURN(L.q_norm, ones(D));
      GL_ASSIGN_OR_RETURN(L.k_norm, ones(D));
    }
    GL_ASSIGN_OR_RETURN(L.w_o, matrix(C * H * D));
    if (c.o_bias) { GL_ASSIGN_OR_RETURN(L.b_o, small(C)); }
    GL_ASSIGN_OR_RETURN(L.w_gate_up, matrix(2 * F * C));
    GL_ASSIGN_OR_RETURN(L.w_down, matrix(C * F));
  }
  GL_CUDA_CHECK(cudaStreamSynchronize(s));
  return gm;
}

// ---- forward ------------------------------------------------------------------------------------

void GpuModel::release_scratch() {
  scratch_.clear();
  scratch_T_ = 0;
  scratch_trace_ = false;
  trace_.clear();
  trace_alt_memory_.clear();
  trace_alt_.clear();
}

Status GpuModel::ensure_scratch(int T, bool trace) {
  if (T <= scratch_T_ && trace == scratch_trace_) return ok_status();
  release_scratch();
  const ModelConfig& c = config_;
  const size_t C = c.hidden_size, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim,
               F = c.intermediate_size;
  const size_t chunk = std::min(T, kRowChunk);
  DeviceArena& a = scratch_;
  GL_ASSIGN_OR_RETURN(ids_, a.alloc<int32_t>(T));
  GL_ASSIGN_OR_RETURN(h_, a.alloc<float>(T * C));
  if (trace) {
    trace_.assign(c.num_layers, {});
    for (auto& t : trace_) {
      GL_ASSIGN_OR_RETURN(bf16 * x, a.alloc<bf16>(T * C));
      GL_ASSIGN_OR_RETURN(bf16 * q, a.alloc<bf16>(T * H * D));
      GL_ASSIGN_OR_RETURN(bf16 * k, a.alloc<bf16>(T * G * D));
      GL_ASSIGN_OR_RETURN(bf16 * v, a.alloc<bf16>(T * G * D));
      GL_ASSIGN_OR_RETURN(bf16 * y, a.alloc<bf16>(T * H * D));
      t = {x, q, k, v, y};
    }
    xn_ = q_ = k_ = v_ = y_ = nullptr;
  } else {
    GL_ASSIGN_OR_RETURN(xn_, a.alloc<bf16>(T * C));
    GL_ASSIGN_OR_RETURN(q_, a.alloc<bf16>(T * H * D));
    GL_ASSIGN_OR_RETURN(k_, a.alloc<bf16>(T * G * D));
    GL_ASSIGN_OR_RETURN(v_, a.alloc<bf16>(T * G * D));
    GL_ASSIGN_OR_RETURN(y_, a.alloc<bf16>(T * H * D));
  }
  if (has_softmax_layers()) {
    GL_ASSIGN_OR_RETURN(qr_, a.alloc<bf16>(T * H * D));
    GL_ASSIGN_OR_RETURN(kr_, a.alloc<bf16>(T * G * D));
  } else {
    qr_ = kr_ = nullptr;
  }
  GL_ASSIGN_OR_RETURN(qkv32_, a.alloc<float>(chunk * (H + 2 * G) * D));
  GL_ASSIGN_OR_RETURN(xn2_, a.alloc<bf16>(chunk * C));
  GL_ASSIGN_OR_RETURN(gu_, a.alloc<bf16>(chunk * 2 * F));
  GL_ASSIGN_OR_RETURN(act_, a.alloc<bf16>(chunk * F));
  hybrid_ws_ = nullptr;
  hybrid_ws_bytes_ = 0;
  for (const GpuLayer& L : layers_)
    if (L.hybrid)
      hybrid_ws_bytes_ = std::max(hybrid_ws_bytes_, kc::hybrid_forward_workspace_bytes(L.hshape, T));
  if (hybrid_ws_bytes_) { GL_ASSIGN_OR_RETURN(hybrid_ws_, a.alloc_bytes(hybrid_ws_bytes_)); }
  scratch_T_ = T;
  scratch_trace_ = trace;
  return ok_status();
}

Status GpuModel::forward_device(const int32_t* ids, int T, float* logits, bool last_only,
                                std::vector<GpuLayerTrace>* trace, GpuSequenceCache* cache) {
  if (T <= 0) return make_error("gpu forward: no tokens");
  const ModelConfig& c = config_;
  const int C = c.hidden_size, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim,
            F = c.intermediate_size, V = c.vocab_size;
  const int HD = H * D, GD = G * D, QKV = HD + 2 * GD;
  const float eps = (float)c.rms_norm_eps;
  if (cache) {
    if (cache->position_ != 0 || cache->model_ != this ||
        (has_softmax_layers() && T > cache->max_context_))
      return make_error("gpu forward: a cache is filled by one forward only when empty, of this "
                        "model, with T ≤ its max context");
  }
  GL_TRY(ensure_scratch(T, trace != nullptr));
  cudaStream_t s = stream_;
  GL_TRY(kc::embed_gather(h_, embed_, ids, T, C, s));
  for (int l = 0; l < c.num_layers; ++l) {
    const GpuLayer& L = layers_[l];
    bf16* X = trace ? const_cast<bf16*>(trace_[l].x) : xn_;
    bf16* Q = trace ? const_cast<bf16*>(trace_[l].q) : q_;
    bf16* K = trace ? const_cast<bf16*>(trace_[l].k) : k_;
    bf16* Vv = trace ? const_cast<bf16*>(trace_[l].v) : v_;
    bf16* Y = trace ? const_cast<bf16*>(trace_[l].y) : y_;
    for (int r0 = 0; r0 < T; r0 += kRowChunk) {
      const int n = std::min(kRowChunk, T - r0);
      GL_TRY(kc::rmsnorm_f32_forward(X + (size_t)r0 * C, h_ + (size_t)r0 * C, L.input_norm, n, C,
                                     eps, s));
      GL_TRY(kc::gemm_nt(cublas_, qkv32_, false, X + (size_t)r0 * C, L.w_qkv, n, QKV, C, 0.0f, s));
      GL_TRY(kc::qkv_split(Q + (size_t)r0 * HD, K + (size_t)r0 * GD, Vv + (size_t)r0 * GD, qkv32_,
                           L.b_qkv, L.q_norm, L.k_norm, n, H, G, D, eps, s));
    }
    if (L.hybrid) {
      // With a cache: the chunked forward's final (delayed) state is the cache's state, and
      // the rest of the cache is filled from the same inputs (the hybrid prefill).
      GL_TRY(kc::hybrid_forward(Y, cache ? cache->hybrid_[l].state : nullptr, L.hshape, L.hparams,
                                X, Q, K, Vv, T, hybrid_ws_, hybrid_ws_bytes_, cublas_, s));
      GL_TRY(kc::gemm_bind_stream(cublas_, s));
      if (cache)
        GL_TRY(kc::hybrid_cache_fill(cache->hybrid_[l], L.hshape, L.hparams, X, Q, K, Vv, T, s));
    } else {
      bf16* kr = cache ? cache->k_[l] : kr_;
      const bf16* vv = Vv;
      if (cache) {
        GL_CUDA_CHECK(cudaMemcpyAsync(cache->v_[l], Vv, (size_t)T * GD * 2,
                                      cudaMemcpyDeviceToDevice, s));
        vv = cache->v_[l];
      }
      GL_CUDA_CHECK(cudaMemcpyAsync(qr_, Q, (size_t)T * HD * 2, cudaMemcpyDeviceToDevice, s));
      GL_CUDA_CHECK(cudaMemcpyAsync(kr, K, (size_t)T * GD * 2, cudaMemcpyDeviceToDevice, s));
      GL_TRY(kc::rope_apply(qr_, inv_freq_, T, H, D, 0, 1, s));
      GL_TRY(kc::rope_apply(kr, inv_freq_, T, G, D, 0, 1, s));
      GL_TRY(kc::attention_forward(Y, nullptr, qr_, kr, vv, T, H, G, D, kc::AttentionMaskSpec{}, s));
    }
    // A trace alone (no logits, no cache) needs nothing after the last layer's mixer.
    if (trace && !logits && !cache && l == c.num_layers - 1) break;
    for (int r0 = 0; r0 < T; r0 += kRowChunk) {
      const int n = std::min(kRowChunk, T - r0);
      float* h = h_ + (size_t)r0 * C;
      GL_TRY(kc::gemm_nt(cublas_, h, false, Y + (size_t)r0 * HD, L.w_o, n, C, HD, 1.0f, s));
      if (L.b_o) GL_TRY(kc::add_bias_rows(h, L.b_o, n, C, s));
      GL_TRY(kc::rmsnorm_f32_forward(xn2_, h, L.post_norm, n, C, eps, s));
      GL_TRY(kc::gemm_nt(cublas_, gu_, true, xn2_, L.w_gate_up, n, 2 * F, C, 0.0f, s));
      GL_TRY(kc::swiglu_stacked(act_, gu_, n, F, s));
      GL_TRY(kc::gemm_nt(cublas_, h, false, act_, L.w_down, n, C, F, 1.0f, s));
    }
  }
  if (logits) {
    const int first = last_only ? T - 1 : 0;
    for (int r0 = first; r0 < T; r0 += kRowChunk) {
      const int n = std::min(kRowChunk, T - r0);
      GL_TRY(kc::rmsnorm_f32_forward(xn2_, h_ + (size_t)r0 * C, final_norm_, n, C, eps, s));
      GL_TRY(kc::gemm_nt(cublas_, logits + (size_t)(r0 - first) * V, false, xn2_, lm_head_, n, V,
                         C, 0.0f, s));
    }
  }
  if (trace) *trace = trace_;
  if (cache) cache->position_ = T;
  return ok_status();
}

Status GpuModel::forward(const int32_t* ids, int T, float* logits, bool last_only) {
  GL_TRY(ensure_scratch(T, false));
  GL_CUDA_CHECK(cudaMemcpyAsync(ids_, ids, (size_t)T * 4, cudaMemcpyHostToDevice, stream_));
  const size_t rows = last_only ? 1 : (size_t)T, V = config_.vocab_size;
  if (logits && logits_rows_ < rows) {
    logits_memory_.clear();
    logits_rows_ = 0;
    GL_ASSIGN_OR_RETURN(logits_, logits_memory_.alloc<float>(rows * V));
    logits_rows_ = rows;
  }
  GL_TRY(forward_device(ids_, T, logits ? logits_ : nullptr, last_only, nullptr, nullptr));
  if (logits)
    GL_CUDA_CHECK(cudaMemcpyAsync(logits, logits_, rows * V * 4, cudaMemcpyDeviceToHost, stream_));
  GL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return ok_status();
}

Status gpu_model_trace(GpuModel& model, const int32_t* tokens, int T,
                       std::vector<GpuLayerTrace>* layers) {
  GL_TRY(model.ensure_scratch(T, true));
  GL_CUDA_CHECK(cudaMemcpyAsync(model.ids_, tokens, (size_t)T * 4, cudaMemcpyHostToDevice,
                                model.stream_));
  GL_TRY(model.forward_device(model.ids_, T, nullptr, false, layers, nullptr));
  GL_CUDA_CHECK(cudaStreamSynchronize(model.stream_));
  return ok_status();
}

Status gpu_model_trace_async(GpuModel& model, const int32_t* tokens, int T, int slot,
                             cudaEvent_t wait, cudaEvent_t done,
                             std::vector<GpuLayerTrace>* layers) {
  if (slot != 0 && slot != 1) return make_error("gpu_model_trace_async: slot ", slot, " is not 0 or 1");
  GL_TRY(model.ensure_scratch(T, true));
  const ModelConfig& c = model.config_;
  if (slot == 1 && model.trace_alt_.empty()) {  // as large as slot 0's (scratch_T_ ≥ T tokens)
    const size_t n = model.scratch_T_, C = c.hidden_size, H = c.num_heads, G = c.num_kv_heads,
                 D = c.head_dim;
    DeviceArena& a = model.trace_alt_memory_;
    std::vector<GpuLayerTrace> alt(c.num_layers);
    for (auto& t : alt) {
      GL_ASSIGN_OR_RETURN(bf16 * x, a.alloc<bf16>(n * C));
      GL_ASSIGN_OR_RETURN(bf16 * q, a.alloc<bf16>(n * H * D));
      GL_ASSIGN_OR_RETURN(bf16 * k, a.alloc<bf16>(n * G * D));
      GL_ASSIGN_OR_RETURN(bf16 * v, a.alloc<bf16>(n * G * D));
      GL_ASSIGN_OR_RETURN(bf16 * y, a.alloc<bf16>(n * H * D));
      t = {x, q, k, v, y};
    }
    model.trace_alt_ = std::move(alt);
  }
  if (model.pinned_T_ < T) {
    for (int i = 0; i < 2; ++i) {
      if (model.ids_copied_[i]) GL_CUDA_CHECK(cudaEventSynchronize(model.ids_copied_[i]));
      if (model.pinned_ids_[i]) GL_CUDA_CHECK(cudaFreeHost(model.pinned_ids_[i]));
      model.pinned_ids_[i] = nullptr;
      GL_CUDA_CHECK(cudaMallocHost(&model.pinned_ids_[i], (size_t)T * sizeof(int32_t)));
      if (!model.ids_copied_[i])
        GL_CUDA_CHECK(cudaEventCreateWithFlags(&model.ids_copied_[i], cudaEventDisableTiming));
    }
    model.pinned_T_ = T;
  }
  // The slot's staging buffer is free once its previous upload has run.
  GL_CUDA_CHECK(cudaEventSynchronize(model.ids_copied_[slot]));
  std::copy_n(tokens, T, model.pinned_ids_[slot]);
  if (wait) GL_CUDA_CHECK(cudaStreamWaitEvent(model.stream_, wait, 0));
  GL_CUDA_CHECK(cudaMemcpyAsync(model.ids_, model.pinned_ids_[slot], (size_t)T * 4,
                                cudaMemcpyHostToDevice, model.stream_));
  GL_CUDA_CHECK(cudaEventRecord(model.ids_copied_[slot], model.stream_));
  if (slot == 1) std::swap(model.trace_, model.trace_alt_);
  Status st = model.forward_device(model.ids_, T, nullptr, false, layers, nullptr);
  if (slot == 1) std::swap(model.trace_, model.trace_alt_);
  GL_TRY(st);
  if (done) GL_CUDA_CHECK(cudaEventRecord(done, model.stream_));
  return ok_status();
}

// ---- decode -------------------------------------------------------------------------------------

Result<std::unique_ptr<GpuSequenceCache>> GpuSequenceCache::create(GpuModel& model,
                                                                   long max_context) {
  auto cache = std::unique_ptr<GpuSequenceCache>(new GpuSequenceCache());
  cache->model_ = &model;
  cache->max_context_ = max_context;
  const ModelConfig& c = model.config_;
  const size_t C = c.hidden_size, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim,
               F = c.intermediate_size, V = c.vocab_size;
  cudaStream_t s = model.stream_;
  DeviceArena& m = cache->memory_;
  cache->k_.assign(c.num_layers, nullptr);
  cache->v_.assign(c.num_layers, nullptr);
  cache->hybrid_.assign(c.num_layers, {});
  cache->hybrid_memory_.assign(c.num_layers, nullptr);
  for (int l = 0; l < c.num_layers; ++l) {
    const GpuLayer& L = model.layers_[l];
    if (L.hybrid) {
      const size_t bytes = kc::hybrid_cache_bytes(L.hshape);
      GL_ASSIGN_OR_RETURN(void* mem, m.alloc_bytes(bytes));
      cache->hybrid_memory_[l] = mem;
      GL_ASSIGN_OR_RETURN(cache->hybrid_[l], kc::hybrid_cache_create(L.hshape, mem, s));
      cache->cache_bytes_ += bytes;
    } else {
      GL_ASSIGN_OR_RETURN(cache->k_[l], m.alloc<bf16>((size_t)max_context * G * D));
      GL_ASSIGN_OR_RETURN(cache->v_[l], m.alloc<bf16>((size_t)max_context * G * D));
      cache->cache_bytes_ += (size_t)max_context * G * D * 2 * 2;
    }
  }
  if (model.has_softmax_layers()) {
    cache->attn_ws_bytes_ = kc::attention_decode_workspace_bytes((int)H, (int)D, max_context);
    GL_ASSIGN_OR_RETURN(cache->attn_ws_, cache->step_.alloc_bytes(cache->attn_ws_bytes_));
  }
  DeviceArena& a = cache->step_;
  GL_ASSIGN_OR_RETURN(cache->token_, a.alloc<int32_t>(1));
  GL_ASSIGN_OR_RETURN(cache->next_, a.alloc<int32_t>(1));
  GL_ASSIGN_OR_RETURN(cache->h_, a.alloc<float>(C));
  GL_ASSIGN_OR_RETURN(cache->xn_, a.alloc<bf16>(C));
  GL_ASSIGN_OR_RETURN(cache->q_, a.alloc<bf16>(H * D));
  GL_ASSIGN_OR_RETURN(cache->qr_, a.alloc<bf16>(H * D));
  GL_ASSIGN_OR_RETURN(cache->y_, a.alloc<bf16>(H * D));
  GL_ASSIGN_OR_RETURN(cache->k1_, a.alloc<bf16>(G * D));
  GL_ASSIGN_OR_RETURN(cache->v1_, a.alloc<bf16>(G * D));
  GL_ASSIGN_OR_RETURN(cache->xn2_, a.alloc<bf16>(C));
  GL_ASSIGN_OR_RETURN(cache->gu_, a.alloc<bf16>(2 * F));
  GL_ASSIGN_OR_RETURN(cache->act_, a.alloc<bf16>(F));
  GL_ASSIGN_OR_RETURN(cache->qkv32_, a.alloc<float>((H + 2 * G) * D));
  GL_ASSIGN_OR_RETURN(cache->logits_, a.alloc<float>(V));
  GL_CUDA_CHECK(cudaMemsetAsync(cache->token_, 0, 4, s));
  GL_CUDA_CHECK(cudaStreamSynchronize(s));
  return cache;
}

GpuSequenceCache::~GpuSequenceCache() {
  if (graph_) cudaGraphExecDestroy(graph_);
}

size_t GpuSequenceCache::bytes() const { return cache_bytes_; }

Status GpuSequenceCache::reset() {
  for (size_t l = 0; l < hybrid_.size(); ++l)
    if (hybrid_memory_[l]) {
      GL_ASSIGN_OR_RETURN(hybrid_[l], kc::hybrid_cache_create(model_->layers_[l].hshape,
                                                             hybrid_memory_[l], model_->stream_));
    }
  GL_CUDA_CHECK(cudaStreamSynchronize(model_->stream_));
  position_ = 0;
  return ok_status();
}

Status GpuSequenceCache::enqueue_step(long pos) {
  GpuModel& M = *model_;
  const ModelConfig& c = M.config_;
  const int C = c.hidden_size, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim,
            F = c.intermediate_size, V = c.vocab_size;
  const int HD = H * D, GD = G * D, QKV = HD + 2 * GD;
  const float eps = (float)c.rms_norm_eps;
  cudaStream_t s = M.stream_;
  cublasHandle_t cb = M.cublas_;
  if (M.has_softmax_layers() && pos >= max_context_)
    return make_error("gpu decode: position ", pos, " beyond the cache's ", max_context_, " tokens");
  GL_TRY(kc::embed_gather(h_, M.embed_, token_, 1, C, s));
  for (int l = 0; l < c.num_layers; ++l) {
    const GpuLayer& L = M.layers_[l];
    GL_TRY(kc::rmsnorm_f32_forward(xn_, h_, L.input_norm, 1, C, eps, s));
    GL_TRY(kc::gemm_nt(cb, qkv32_, false, xn_, L.w_qkv, 1, QKV, C, 0.0f, s));
    GL_TRY(kc::qkv_split(q_, k1_, v1_, qkv32_, L.b_qkv, L.q_norm, L.k_norm, 1, H, G, D, eps, s));
    if (L.hybrid) {
      GL_TRY(kc::hybrid_decode_step(y_, L.hshape, L.hparams, hybrid_[l], xn_, q_, k1_, v1_, s));
    } else {
      bf16* kslot = k_[l] + (size_t)pos * GD;
      GL_CUDA_CHECK(cudaMemcpyAsync(kslot, k1_, (size_t)GD * 2, cudaMemcpyDeviceToDevice, s));
      GL_CUDA_CHECK(cudaMemcpyAsync(v_[l] + (size_t)pos * GD, v1_, (size_t)GD * 2,
                                    cudaMemcpyDeviceToDevice, s));
      GL_CUDA_CHECK(cudaMemcpyAsync(qr_, q_, (size_t)HD * 2, cudaMemcpyDeviceToDevice, s));
      GL_TRY(kc::rope_apply(kslot, M.inv_freq_, 1, G, D, pos, 1, s));
      GL_TRY(kc::rope_apply(qr_, M.inv_freq_, 1, H, D, pos, 1, s));
      GL_TRY(kc::attention_decode(y_, qr_, k_[l], v_[l], pos + 1, H, G, D, attn_ws_,
                                  attn_ws_bytes_, s));
    }
    GL_TRY(kc::gemm_nt(cb, h_, false, y_, L.w_o, 1, C, HD, 1.0f, s));
    if (L.b_o) GL_TRY(kc::add_bias_rows(h_, L.b_o, 1, C, s));
    GL_TRY(kc::rmsnorm_f32_forward(xn2_, h_, L.post_norm, 1, C, eps, s));
    GL_TRY(kc::gemm_nt(cb, gu_, true, xn2_, L.w_gate_up, 1, 2 * F, C, 0.0f, s));
    GL_TRY(kc::swiglu_stacked(act_, gu_, 1, F, s));
    GL_TRY(kc::gemm_nt(cb, h_, false, act_, L.w_down, 1, C, F, 1.0f, s));
  }
  GL_TRY(kc::rmsnorm_f32_forward(xn2_, h_, M.final_norm_, 1, C, eps, s));
  GL_TRY(kc::gemm_nt(cb, logits_, false, xn2_, M.lm_head_, 1, V, C, 0.0f, s));
  GL_TRY(kc::argmax_rows(next_, logits_, 1, V, s));
  GL_CUDA_CHECK(cudaMemcpyAsync(token_, next_, 4, cudaMemcpyDeviceToDevice, s));  // greedy feed
  return ok_status();
}

Status GpuSequenceCache::capture_step(long pos) {
  cudaStream_t s = model_->stream_;
  if (graph_) {
    cudaGraphExecDestroy(graph_);
    graph_ = nullptr;
  }
  cudaGraph_t graph;
  GL_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  Status st = enqueue_step(pos);
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  if (!st.ok()) {
    if (end == cudaSuccess) cudaGraphDestroy(graph);
    return st;
  }
  GL_CUDA_CHECK(end);
  const cudaError_t inst = cudaGraphInstantiate(&graph_, graph, 0);
  cudaGraphDestroy(graph);
  GL_CUDA_CHECK(inst);
  return ok_status();
}

Status GpuSequenceCache::launch_step() {
  if (!graph_) return make_error("gpu decode: no captured step");
  GL_CUDA_CHECK(cudaGraphLaunch(graph_, model_->stream_));
  return ok_status();
}

Status GpuSequenceCache::fill_random(long pos, uint64_t seed) {
  GpuModel& M = *model_;
  const ModelConfig& c = M.config_;
  const size_t H = c.num_heads, G = c.num_kv_heads, D = c.head_dim;
  cudaStream_t s = M.stream_;
  if (M.has_softmax_layers() && pos > max_context_)
    return make_error("fill_random: position ", pos, " beyond the cache");
  for (int l = 0; l < c.num_layers; ++l) {
    const uint64_t sd = seed * 131 + (uint64_t)l * 17;
    if (M.layers_[l].hybrid) {
      const HybridCacheView& v = hybrid_[l];
      const HybridShape& sh = M.layers_[l].hshape;
      const size_t ring = sh.window + 1, sinks = std::max(1, sh.sinks);
      GL_TRY(kc::fill_uniform_f32(v.state, H * D * D, sd + 1, -0.05f, 0.05f, s));
      GL_TRY(kc::fill_uniform_bf16(v.ring_k, ring * G * D, sd + 2, -1, 1, s));
      GL_TRY(kc::fill_uniform_bf16(v.ring_v, ring * G * D, sd + 3, -1, 1, s));
      GL_TRY(kc::fill_uniform_bf16(v.ring_key, ring * G * D, sd + 4, -0.1f, 0.1f, s));
      GL_TRY(kc::fill_uniform_f32(v.ring_g, ring * H, sd + 5, -0.1f, -0.001f, s));
      GL_TRY(kc::fill_uniform_f32(v.ring_beta, ring * H, sd + 6, 0.05f, 0.95f, s));
      GL_TRY(kc::fill_uniform_bf16(v.sink_k, sinks * G * D, sd + 7, -1, 1, s));
      GL_TRY(kc::fill_uniform_bf16(v.sink_v, sinks * G * D, sd + 8, -1, 1, s));
      GL_TRY(kc::fill_uniform_f32(v.conv_q, 4 * H * D, sd + 9, -1, 1, s));
      GL_TRY(kc::fill_uniform_f32(v.conv_k, 4 * G * D, sd + 10, -1, 1, s));
      GL_TRY(kc::fill_uniform_f32(v.conv_v, 4 * G * D, sd + 11, -1, 1, s));
      GL_CUDA_CHECK(cudaMemcpyAsync(v.position, &pos, sizeof(long), cudaMemcpyHostToDevice, s));
    } else if (pos > 0) {
      GL_TRY(kc::fill_uniform_bf16(k_[l], (size_t)pos * G * D, sd + 12, -1, 1, s));
      GL_TRY(kc::fill_uniform_bf16(v_[l], (size_t)pos * G * D, sd + 13, -1, 1, s));
    }
  }
  GL_CUDA_CHECK(cudaStreamSynchronize(s));  // &pos is a stack value
  position_ = pos;
  return ok_status();
}

Status gpu_decode(GpuModel& model, GpuSequenceCache& cache, int32_t token, float* logits,
                  int32_t* next) {
  if (cache.model_ != &model) return make_error("gpu decode: the cache belongs to another model");
  cudaStream_t s = model.stream_;
  GL_CUDA_CHECK(cudaMemcpyAsync(cache.token_, &token, 4, cudaMemcpyHostToDevice, s));
  if (!model.has_softmax_layers()) {
    if (!cache.graph_) GL_TRY(cache.capture_step(0));
    GL_TRY(cache.launch_step());
  } else {
    GL_TRY(cache.enqueue_step(cache.position_));
  }
  if (logits)
    GL_CUDA_CHECK(cudaMemcpyAsync(logits, cache.logits_, (size_t)model.config_.vocab_size * 4,
                                  cudaMemcpyDeviceToHost, s));
  if (next) GL_CUDA_CHECK(cudaMemcpyAsync(next, cache.next_, 4, cudaMemcpyDeviceToHost, s));
  GL_CUDA_CHECK(cudaStreamSynchronize(s));
  cache.position_ += 1;
  return ok_status();
}

Status gpu_prefill(GpuModel& model, GpuSequenceCache& cache, const int32_t* tokens, int T,
                   float* last_logits) {
  if (T <= 0) return make_error("gpu prefill: no tokens");
  if (cache.position_ == 0 && T > 1) {
    GL_TRY(model.ensure_scratch(T, false));
    cudaStream_t s = model.stream_;
    GL_CUDA_CHECK(cudaMemcpyAsync(model.ids_, tokens, (size_t)T * 4, cudaMemcpyHostToDevice, s));
    GL_TRY(model.forward_device(model.ids_, T, cache.logits_, true, nullptr, &cache));
    if (last_logits)
      GL_CUDA_CHECK(cudaMemcpyAsync(last_logits, cache.logits_,
                                    (size_t)model.config_.vocab_size * 4, cudaMemcpyDeviceToHost, s));
    GL_CUDA_CHECK(cudaStreamSynchronize(s));
    return ok_status();
  }
  for (int t = 0; t < T; ++t)
    GL_TRY(gpu_decode(model, cache, tokens[t], t + 1 == T ? last_logits : nullptr, nullptr));
  return ok_status();
}

}  // namespace golinear::cuda
