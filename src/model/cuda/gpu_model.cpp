// The transformer on one GPU (gpu_model.h). Mirrors model/transformer.cpp's forward_tokens:
//   embed → [RMSNorm → [q;k;v] GEMM (+bias, +q/k norm) → mixer → h += y·W_oᵀ → RMSNorm →
//            [gate;up] GEMM → SwiGLU → h += act·W_downᵀ] × L → RMSNorm → lm_head
// with the residual stream h in fp32 and every other activation bf16. The per-token stages run
// over row chunks (bounded scratch at 1M tokens); the mixer sees the whole sequence.
#include "model/cuda/gpu_model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>

#include "kernels/cuda/activation.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/hybrid.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/random_fill.h"
#include "kernels/cuda/rope.h"
#include "mixers/hybrid_mixer.h"
#include "mixers/mixer_factory.h"

namespace golinear::model::cuda {

namespace kc = kernels::cuda;

namespace {

constexpr int kRowChunk = 16384;  // rows of the per-token stages per pass

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

// What a captured decode step depends on beyond the buffers: the batch size and, with softmax
// layers, how attention_decode_batch splits the keys (kernels/cuda/attention.h).
struct DecodeGraphKey {
  int B = 0;
  kc::AttentionDecodeSplit split;  // all zero for a model without softmax layers
  bool operator==(const DecodeGraphKey&) const = default;
  bool softmax() const { return split.splits != 0; }
};

// gpu_decode_batch's buffers for up to `capacity` rows, the per-layer tables of the batch in
// use (hybrid views, K/V cache rows) and the captured graphs of the step: one per batch size for
// an all-hybrid model; with softmax layers, whose key changes with the context (every 128 to a
// few thousand tokens), a key is captured the second time it is seen (a batch of changing
// sizes and lengths would otherwise capture at every step) and the kMaxSplitGraphs most recent
// are kept.
struct GpuBatchStep {
  static constexpr size_t kMaxSplitGraphs = 16;
  int capacity = 0;
  DeviceArena memory;
  int32_t *ids = nullptr, *next = nullptr;
  long* positions = nullptr;  // (capacity) then lengths (capacity) = positions + 1
  float *h = nullptr, *qkv32 = nullptr, *logits = nullptr;
  bf16 *xn = nullptr, *qkv = nullptr, *qr = nullptr, *y = nullptr,
       *xn2 = nullptr, *gu = nullptr, *act = nullptr, *lora_u = nullptr;
  HybridCacheView* views = nullptr;  // (layers, capacity)
  bf16** kv_rows = nullptr;          // (layers, 2, capacity): k rows then v rows
  DeviceArena attn_memory;           // attention_decode_batch's workspace
  void* attn_ws = nullptr;
  size_t attn_ws_bytes = 0;
  std::vector<uint64_t> tables_of;  // the serials of the caches the tables describe, in order
  std::vector<std::pair<DecodeGraphKey, cudaGraphExec_t>> graphs;  // oldest first
  std::vector<DecodeGraphKey> seen;  // softmax keys run once without a graph, oldest first

  ~GpuBatchStep() { drop_graphs(); }
  void drop_graphs() {
    for (auto& g : graphs) cudaGraphExecDestroy(g.second);
    graphs.clear();
    seen.clear();
  }
  cudaGraphExec_t graph(const DecodeGraphKey& key) const {
    for (const auto& g : graphs)
      if (g.first == key) return g.second;
    return nullptr;
  }
  // Whether to capture `key` now (else the step is enqueued without a graph): always for an
  // all-hybrid key, the second time for a softmax one.
  bool capture(const DecodeGraphKey& key) {
    if (!key.softmax()) return true;
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) return true;
    if (seen.size() == kMaxSplitGraphs) seen.erase(seen.begin());
    seen.push_back(key);
    return false;
  }
  // Called while no graph of this step runs (it may drop the oldest softmax-keyed graph).
  void add_graph(const DecodeGraphKey& key, cudaGraphExec_t exec) {
    auto softmax = [](const auto& g) { return g.first.softmax(); };
    if (key.softmax() &&
        std::count_if(graphs.begin(), graphs.end(), softmax) == (long)kMaxSplitGraphs) {
      auto oldest = std::find_if(graphs.begin(), graphs.end(), softmax);
      cudaGraphExecDestroy(oldest->second);
      graphs.erase(oldest);
    }
    graphs.emplace_back(key, exec);
  }
};

// ---- GpuModel -----------------------------------------------------------------------------------

GpuModel::GpuModel() = default;

GpuModel::~GpuModel() {
  batch_step_.reset();  // its graphs use the cuBLAS workspace
  for (int i = 0; i < 2; ++i) {  // nothing to report from a destructor
    if (pinned_ids_[i]) cudaFreeHost(pinned_ids_[i]);
    if (ids_copied_[i]) cudaEventDestroy(ids_copied_[i]);
  }
  trace_alt_memory_.clear();
  scratch_.clear();
  layers_.clear();
  own_lora_.reset();
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
  GL_CUBLAS_CHECK(cublasCreate(&cublas_));
  GL_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
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
  for (const GpuLayer& l : layers_) total += l.mixer_values.bytes();
  if (own_lora_) total += own_lora_->bytes();
  return total;
}

bool GpuModel::has_hybrid_layers() const {
  return std::any_of(layers_.begin(), layers_.end(), [](const GpuLayer& l) { return l.hybrid != nullptr; });
}
bool GpuModel::has_softmax_layers() const {
  return std::any_of(layers_.begin(), layers_.end(), [](const GpuLayer& l) { return !l.hybrid; });
}

void GpuModel::mixers_changed() {
  ++mixers_version_;
  if (batch_step_) {  // the graphs hold the old mixers' pointers, the tables old caches'
    batch_step_->drop_graphs();
    batch_step_->tables_of.clear();
  }
}

void GpuModel::set_all_softmax() {
  release_scratch();  // the scratch depends on the mixers (RoPE copies, hybrid workspace)
  mixers_changed();
  for (GpuLayer& l : layers_) {
    l.hybrid = nullptr;
    l.own_mixer.reset();
    (void)l.mixer_values.allocate(0);  // freeing cannot fail
  }
}

void GpuModel::attach_mixer(int layer, mixers::cuda::GpuHybridMixer* mixer) {
  GpuLayer& L = layers_[layer];
  if (L.hybrid != mixer || L.own_mixer) mixers_changed();
  L.own_mixer.reset();
  (void)L.mixer_values.allocate(0);  // freeing cannot fail
  L.hybrid = mixer;
}

Status GpuModel::set_lora(const LoraAdapters& host) {
  release_scratch();  // the scratch holds the adapters' working rows
  mixers_changed();
  lora_ = nullptr;
  own_lora_.reset();
  if (!host.enabled()) return ok_status();
  GL_ASSIGN_OR_RETURN(own_lora_, GpuLora::create(config_, host, nullptr, nullptr));
  GL_TRY(own_lora_->upload(host, stream_));
  lora_ = own_lora_.get();
  return ok_status();
}

void GpuModel::attach_lora(GpuLora* lora) {
  if (lora != lora_) {
    release_scratch();
    mixers_changed();
  }
  own_lora_.reset();
  lora_ = lora;
}

Status GpuModel::set_layer_mixer(int layer, mixers::Mixer& mixer) {
  if (layer < 0 || layer >= (int)layers_.size())
    return make_error("gpu model: no layer ", layer);
  release_scratch();  // the scratch depends on the mixers
  mixers_changed();
  GpuLayer& L = layers_[layer];
  L.hybrid = nullptr;
  L.own_mixer.reset();
  GL_TRY(L.mixer_values.allocate(0));
  if (mixer.kind() == "softmax") return ok_status();
  const auto* hm = dynamic_cast<const mixers::HybridMixer*>(&mixer);
  if (!hm) return make_error("gpu model: layer ", layer, " has mixer '", mixer.kind(), "' with no GPU form");
  const mixers::MixerOptions& o = hm->options();
  if (Status st = mixers::cuda::hybrid_check_recipe(o, hm->shape()); !st.ok())
    return make_error("gpu model: layer ", layer, ": ", st.error());
  GL_TRY(L.mixer_values.allocate(mixers::cuda::hybrid_parameter_count(o, hm->shape())));
  const std::vector<float> inv = rope_inverse_frequencies(config_.rope, config_.head_dim);
  GL_ASSIGN_OR_RETURN(mixers::cuda::GpuHybridMixer m,
                      mixers::cuda::GpuHybridMixer::create(o, hm->shape(), inv,
                                                           L.mixer_values.get(), nullptr));
  L.own_mixer = std::make_unique<mixers::cuda::GpuHybridMixer>(std::move(m));
  L.hybrid = L.own_mixer.get();
  return L.hybrid->upload(mixer, stream_);
}

Status GpuModel::set_all_hybrid_random(const mixers::MixerOptions& o, uint64_t seed) {
  const ModelConfig& c = config_;
  const mixers::AttentionShape shape{c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim};
  for (int l = 0; l < c.num_layers; ++l) {
    GL_ASSIGN_OR_RETURN(std::unique_ptr<mixers::Mixer> mixer, mixers::mixer_create(o, shape, seed + l));
    GL_TRY(set_layer_mixer(l, *mixer));
  }
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
    GL_TRY(gm->set_layer_mixer(l, *model.mixers[l]));
  }
  GL_TRY(gm->set_lora(model.lora));
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

Status GpuModel::ensure_scratch(int T, bool trace, bool whole_rows, bool softmax) {
  // The hybrid layers' forward (their mixers may have changed since the last call).
  size_t hybrid_bytes = 0;
  for (const GpuLayer& L : layers_)
    if (L.hybrid)
      hybrid_bytes = std::max(hybrid_bytes, mixers::cuda::HybridScratch::bytes(
                                                L.hybrid->options(), L.hybrid->shape(), T, false));
  GL_TRY(hybrid_scratch_.reserve(hybrid_bytes));
  softmax = softmax || has_softmax_layers();
  if (T <= scratch_T_ && trace == scratch_trace_ && (!whole_rows || scratch_whole_) &&
      (!softmax || qr_))
    return ok_status();
  // What the scratch held stays (a trainer alternates whole-row and softmax passes).
  whole_rows = whole_rows || (scratch_whole_ && T <= scratch_T_);
  softmax = softmax || qr_ != nullptr;
  T = std::max(T, trace == scratch_trace_ ? scratch_T_ : 0);
  release_scratch();
  const ModelConfig& c = config_;
  const size_t C = c.hidden_size, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim,
               F = c.intermediate_size;
  const size_t chunk = whole_rows ? T : std::min(T, kRowChunk);
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
  if (softmax) {
    GL_ASSIGN_OR_RETURN(qr_, a.alloc<bf16>(T * H * D));
    GL_ASSIGN_OR_RETURN(kr_, a.alloc<bf16>(T * G * D));
  } else {
    qr_ = kr_ = nullptr;
  }
  GL_ASSIGN_OR_RETURN(qkv32_, a.alloc<float>(chunk * (H + 2 * G) * D));
  GL_ASSIGN_OR_RETURN(xn2_, a.alloc<bf16>(chunk * C));
  GL_ASSIGN_OR_RETURN(gu_, a.alloc<bf16>(chunk * 2 * F));
  GL_ASSIGN_OR_RETURN(act_, a.alloc<bf16>(chunk * F));
  lora_u_ = nullptr;
  if (lora_) { GL_ASSIGN_OR_RETURN(lora_u_, a.alloc<bf16>(chunk * 3 * lora_->rank())); }
  scratch_T_ = T;
  scratch_trace_ = trace;
  scratch_whole_ = whole_rows;
  return ok_status();
}

Status GpuModel::block_input(const GpuLayer& L, const float* h, int n, bf16* xn, bf16* q,
                             bf16* k, bf16* v, float* qkv32, cudaStream_t s, float* q_raw,
                             float* k_raw, bf16* lora_u) const {
  const ModelConfig& c = config_;
  const int C = c.hidden_size, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim;
  const int HD = H * D, GD = G * D, QKV = HD + 2 * GD;
  const float eps = (float)c.rms_norm_eps;
  GL_TRY(kc::rmsnorm_f32_forward(xn, h, L.input_norm, n, C, eps, s));
  // One row with q, k, v one after the other and nothing between the product and the split but
  // the rounding to bf16 (no bias, q/k norm or adapters): the product rounds into them itself
  // (the split's bits, one launch fewer).
  if (n == 1 && k == q + HD && v == k + GD && !L.b_qkv && !L.q_norm && !q_raw && !lora_u)
    return kc::gemm_nt(cublas_, q, true, xn, L.w_qkv, n, QKV, C, 0.0f, s);
  GL_TRY(kc::gemm_nt(cublas_, qkv32, false, xn, L.w_qkv, n, QKV, C, 0.0f, s));
  if (lora_u && lora_) GL_TRY(lora_->forward_qkv((int)(&L - layers_.data()), qkv32, xn, lora_u, n, cublas_, s));
  if (!q_raw || !L.q_norm)
    return kc::qkv_split(q, k, v, qkv32, L.b_qkv, L.q_norm, L.k_norm, n, H, G, D, eps, s);
  // Keep q, k before their per-head norm (the norm's backward reads them): the bias first.
  if (L.b_qkv) GL_TRY(kc::add_bias_rows(qkv32, L.b_qkv, n, QKV, s));
  GL_CUDA_CHECK(cudaMemcpy2DAsync(q_raw, (size_t)HD * 4, qkv32, (size_t)QKV * 4, (size_t)HD * 4, n,
                                  cudaMemcpyDeviceToDevice, s));
  GL_CUDA_CHECK(cudaMemcpy2DAsync(k_raw, (size_t)GD * 4, qkv32 + HD, (size_t)QKV * 4,
                                  (size_t)GD * 4, n, cudaMemcpyDeviceToDevice, s));
  return kc::qkv_split(q, k, v, qkv32, nullptr, L.q_norm, L.k_norm, n, H, G, D, eps, s);
}

Status GpuModel::block_output(const GpuLayer& L, float* h, const bf16* y, int n, bf16* xn2,
                              bf16* gu, bf16* act, cudaStream_t s, float* h_mid,
                              bf16* lora_u) const {
  const ModelConfig& c = config_;
  const int C = c.hidden_size, HD = c.num_heads * c.head_dim, F = c.intermediate_size;
  const float eps = (float)c.rms_norm_eps;
  GL_TRY(kc::gemm_nt(cublas_, h, false, y, L.w_o, n, C, HD, 1.0f, s));
  if (lora_u && lora_) GL_TRY(lora_->forward_o((int)(&L - layers_.data()), h, y, lora_u, n, cublas_, s));
  if (L.b_o) GL_TRY(kc::add_bias_rows(h, L.b_o, n, C, s));
  if (h_mid)
    GL_CUDA_CHECK(cudaMemcpyAsync(h_mid, h, (size_t)n * C * 4, cudaMemcpyDeviceToDevice, s));
  GL_TRY(kc::rmsnorm_f32_forward(xn2, h, L.post_norm, n, C, eps, s));
  GL_TRY(kc::gemm_nt(cublas_, gu, true, xn2, L.w_gate_up, n, 2 * F, C, 0.0f, s));
  GL_TRY(kc::swiglu_stacked(act, gu, n, F, s));
  return kc::gemm_nt(cublas_, h, false, act, L.w_down, n, C, F, 1.0f, s);
}

Status GpuModel::head_logits(const float* h, int n, float* logits, bf16* xn2, cudaStream_t s) const {
  const ModelConfig& c = config_;
  GL_TRY(kc::rmsnorm_f32_forward(xn2, h, final_norm_, n, c.hidden_size, (float)c.rms_norm_eps, s));
  return kc::gemm_nt(cublas_, logits, false, xn2, lm_head_, n, c.vocab_size, c.hidden_size, 0.0f, s);
}

Status GpuModel::forward_device(const int32_t* ids, int T, const GpuForwardOptions& o) {
  if (T <= 0) return make_error("gpu forward: no tokens");
  const ModelConfig& c = config_;
  const int C = c.hidden_size, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim,
            F = c.intermediate_size, V = c.vocab_size;
  const int HD = H * D, GD = G * D;
  std::vector<GpuLayerTrace>* trace = o.trace;
  GpuSequenceCache* cache = o.cache;
  GpuActivations* keep = o.keep;
  if (cache) {
    if (cache->position_ != 0 || !cache->made_for(*this) ||
        (has_softmax_layers() && T > cache->max_context_))
      return make_error("gpu forward: a cache is filled by one forward only when empty, of this "
                        "model, with T ≤ its max context");
    GL_TRY(cache->order_after_copy());
  }
  for (GpuSequenceCache* each : o.caches)
    if (each) GL_TRY(each->order_after_copy());
  if (keep && (keep->T != T || (int)keep->layers.size() != c.num_layers))
    return make_error("gpu forward: activations for ", keep->T, " tokens, the forward has ", T);
  if (keep && trace) return make_error("gpu forward: keep activations or trace, not both");
  // The packed sequences [starts[i], starts[i + 1]) of the input (one unless packed).
  std::vector<int> starts = {0};
  for (int n : o.sequences) {
    if (n <= 0) return make_error("gpu forward: a packed sequence of ", n, " tokens");
    starts.push_back(starts.back() + n);
  }
  if (o.sequences.empty()) starts.push_back(T);
  if (starts.back() != T)
    return make_error("gpu forward: packed sequences of ", starts.back(), " tokens, the input has ", T);
  if (!o.sequences.empty() && (cache || keep || trace))
    return make_error("gpu forward: packed sequences fill no single cache and keep no activations");
  // Packed prefills: one empty cache of this model per sequence.
  if (!o.caches.empty()) {
    if (o.caches.size() != o.sequences.size())
      return make_error("gpu forward: ", o.caches.size(), " caches for ", o.sequences.size(),
                        " packed sequences");
    for (size_t i = 0; i < o.caches.size(); ++i) {
      const GpuSequenceCache* c = o.caches[i];
      if (!c || c->position_ != 0 || !c->made_for(*this) ||
          (has_softmax_layers() && o.sequences[i] > c->max_context_))
        return make_error("gpu forward: packed sequence ", i, " needs an empty cache of this "
                          "model with room for its ", o.sequences[i], " tokens");
    }
  }
  // The cache sequence i fills, or null.
  auto cache_of = [&](size_t i) -> GpuSequenceCache* {
    return cache ? cache : o.caches.empty() ? nullptr : o.caches[i];
  };
  int picked = 0;  // rows of logit_rows
  for (const GpuRowRange& r : o.logit_rows) {
    if (r.count <= 0 || r.first < picked || r.first + r.count > T)
      return make_error("gpu forward: logit rows [", r.first, ", ", r.first + r.count,
                        ") are not ascending, disjoint ranges of the ", T, " rows");
    picked = r.first + r.count;
  }
  GL_TRY(ensure_scratch(T, trace != nullptr, keep != nullptr, o.all_softmax));
  cudaStream_t s = stream_;
  bf16* lora_u = o.all_softmax ? nullptr : lora_u_;  // the teacher pass runs without adapters
  // Rows per pass of the per-token stages; whole sequences when activations are kept.
  const int chunk = keep ? T : kRowChunk;
  GL_TRY(kc::embed_gather(h_, embed_, ids, T, C, s));
  for (int l = 0; l < c.num_layers; ++l) {
    const GpuLayer& L = layers_[l];
    GpuLayerActivations* A = keep ? &keep->layers[l] : nullptr;
    mixers::cuda::GpuHybridMixer* hybrid = o.all_softmax ? nullptr : L.hybrid;
    bf16* X = trace ? const_cast<bf16*>(trace_[l].x) : A ? A->xn : xn_;
    bf16* Q = trace ? const_cast<bf16*>(trace_[l].q) : A ? A->q : q_;
    bf16* K = trace ? const_cast<bf16*>(trace_[l].k) : A ? A->k : k_;
    bf16* Vv = trace ? const_cast<bf16*>(trace_[l].v) : A ? A->v : v_;
    bf16* Y = trace ? const_cast<bf16*>(trace_[l].y) : A ? A->y : y_;
    if (A) GL_CUDA_CHECK(cudaMemcpyAsync(A->h_in, h_, (size_t)T * C * 4, cudaMemcpyDeviceToDevice, s));
    for (int r0 = 0; r0 < T; r0 += chunk) {
      const int n = std::min(chunk, T - r0);
      GL_TRY(block_input(L, h_ + (size_t)r0 * C, n, X + (size_t)r0 * C, Q + (size_t)r0 * HD,
                         K + (size_t)r0 * GD, Vv + (size_t)r0 * GD, qkv32_, s,
                         A ? A->q_raw : nullptr, A ? A->k_raw : nullptr, lora_u));
    }
    if (hybrid) {
      // With a cache: the prefill, which leaves the cache as T decode steps would.
      for (size_t i = 0; i + 1 < starts.size(); ++i) {
        const size_t t0 = starts[i];
        const mixers::cuda::HybridIO io{starts[i + 1] - starts[i], X + t0 * C, Q + t0 * HD,
                                        K + t0 * GD, Vv + t0 * GD};
        if (GpuSequenceCache* c = cache_of(i))
          GL_TRY(hybrid->prefill(hybrid_scratch_, io, Y + t0 * HD, c->hybrid_[l], cublas_, s));
        else
          GL_TRY(hybrid->forward(hybrid_scratch_, io, Y + t0 * HD, nullptr, cublas_, s));
      }
      GL_TRY(kc::gemm_bind_stream(cublas_, s));
    } else {
      // Queries RoPE'd in a copy; keys (and values) in the sequence's cache when it fills one.
      bf16* qr = A ? A->qr : qr_;
      GL_CUDA_CHECK(cudaMemcpyAsync(qr, Q, (size_t)T * HD * 2, cudaMemcpyDeviceToDevice, s));
      for (size_t i = 0; i + 1 < starts.size(); ++i) {
        const size_t t0 = starts[i];
        const int n = starts[i + 1] - starts[i];
        GpuSequenceCache* c = cache_of(i);
        bf16* kr = c ? c->k_[l] : (A ? A->kr : kr_) + t0 * GD;
        const bf16* vv = Vv + t0 * GD;
        if (c) {
          GL_CUDA_CHECK(cudaMemcpyAsync(c->v_[l], vv, (size_t)n * GD * 2,
                                        cudaMemcpyDeviceToDevice, s));
          vv = c->v_[l];
        }
        GL_CUDA_CHECK(cudaMemcpyAsync(kr, K + t0 * GD, (size_t)n * GD * 2,
                                      cudaMemcpyDeviceToDevice, s));
        GL_TRY(kc::rope_apply(qr + t0 * HD, inv_freq_, n, H, D, 0, 1, s));
        GL_TRY(kc::rope_apply(kr, inv_freq_, n, G, D, 0, 1, s));
        GL_TRY(kc::attention_forward(Y + t0 * HD, A ? A->lse : nullptr, qr + t0 * HD, kr, vv, n,
                                     H, G, D, kc::AttentionMaskSpec{}, s));
      }
    }
    // A trace alone (no logits, no cache) needs nothing after the last layer's mixer.
    if (trace && !o.logits && !cache && l == c.num_layers - 1) break;
    for (int r0 = 0; r0 < T; r0 += chunk) {
      const int n = std::min(chunk, T - r0);
      GL_TRY(block_output(L, h_ + (size_t)r0 * C, Y + (size_t)r0 * HD, n, xn2_,
                          A ? A->gu + (size_t)r0 * 2 * F : gu_, act_, s,
                          A ? A->h_mid + (size_t)r0 * C : nullptr, lora_u));
    }
  }
  if (keep)
    GL_CUDA_CHECK(cudaMemcpyAsync(keep->h_final, h_, (size_t)T * C * 4, cudaMemcpyDeviceToDevice, s));
  if (o.logits) {
    // The head over rows [first, T) of `rows`: h itself, or the logit rows gathered.
    const float* rows = h_;
    int first = o.last_only ? T - 1 : 0, end = T;
    if (!o.logit_rows.empty()) {
      int n = 0;
      for (const GpuRowRange& r : o.logit_rows) n += r.count;
      if (picked_h_.size() < (size_t)n * C) GL_TRY(picked_h_.allocate((size_t)n * C));
      n = 0;
      for (const GpuRowRange& r : o.logit_rows) {
        GL_CUDA_CHECK(cudaMemcpyAsync(picked_h_.get() + (size_t)n * C, h_ + (size_t)r.first * C,
                                      (size_t)r.count * C * 4, cudaMemcpyDeviceToDevice, s));
        n += r.count;
      }
      rows = picked_h_.get();
      first = 0;
      end = n;
    }
    for (int r0 = first; r0 < end; r0 += chunk) {
      const int n = std::min(chunk, end - r0);
      GL_TRY(head_logits(rows + (size_t)r0 * C, n, o.logits + (size_t)(r0 - first) * V, xn2_, s));
    }
  }
  if (trace) *trace = trace_;
  if (cache) cache->position_ = T;
  for (size_t i = 0; i < o.caches.size(); ++i) o.caches[i]->position_ = o.sequences[i];
  return ok_status();
}

Result<std::unique_ptr<GpuActivations>> gpu_activations_allocate(const GpuModel& model, int T) {
  const ModelConfig& c = model.config();
  const size_t t = T, C = c.hidden_size, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim,
               F = c.intermediate_size;
  auto a = std::make_unique<GpuActivations>();
  a->T = T;
  a->layers.assign(c.num_layers, {});
  DeviceArena& m = a->memory;
  for (int l = 0; l < c.num_layers; ++l) {
    GpuLayerActivations& A = a->layers[l];
    GL_ASSIGN_OR_RETURN(A.h_in, m.alloc<float>(t * C));
    GL_ASSIGN_OR_RETURN(A.h_mid, m.alloc<float>(t * C));
    GL_ASSIGN_OR_RETURN(A.xn, m.alloc<bf16>(t * C));
    GL_ASSIGN_OR_RETURN(A.q, m.alloc<bf16>(t * H * D));
    GL_ASSIGN_OR_RETURN(A.k, m.alloc<bf16>(t * G * D));
    GL_ASSIGN_OR_RETURN(A.v, m.alloc<bf16>(t * G * D));
    GL_ASSIGN_OR_RETURN(A.y, m.alloc<bf16>(t * H * D));
    GL_ASSIGN_OR_RETURN(A.gu, m.alloc<bf16>(t * 2 * F));
    if (model.layer(l).q_norm) {
      GL_ASSIGN_OR_RETURN(A.q_raw, m.alloc<float>(t * H * D));
      GL_ASSIGN_OR_RETURN(A.k_raw, m.alloc<float>(t * G * D));
    }
    // Softmax state (any layer may run as softmax: the teacher pass, layers kept full).
    GL_ASSIGN_OR_RETURN(A.qr, m.alloc<bf16>(t * H * D));
    GL_ASSIGN_OR_RETURN(A.kr, m.alloc<bf16>(t * G * D));
    GL_ASSIGN_OR_RETURN(A.lse, m.alloc<float>(t * H));
  }
  GL_ASSIGN_OR_RETURN(a->h_final, m.alloc<float>(t * C));
  return a;
}

Status GpuModel::reserve_logits(size_t rows) {
  if (logits_rows_ >= rows) return ok_status();
  logits_memory_.clear();
  logits_rows_ = 0;
  GL_ASSIGN_OR_RETURN(logits_, logits_memory_.alloc<float>(rows * config_.vocab_size));
  logits_rows_ = rows;
  return ok_status();
}

Status GpuModel::forward(const int32_t* ids, int T, float* logits, bool last_only) {
  GL_TRY(ensure_scratch(T, false));
  GL_CUDA_CHECK(cudaMemcpyAsync(ids_, ids, (size_t)T * 4, cudaMemcpyHostToDevice, stream_));
  const size_t rows = last_only ? 1 : (size_t)T, V = config_.vocab_size;
  if (logits) GL_TRY(reserve_logits(rows));
  GL_TRY(forward_device(ids_, T, {.logits = logits ? logits_ : nullptr, .last_only = last_only}));
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
  GL_TRY(model.forward_device(model.ids_, T, {.trace = layers}));
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
  Status st = model.forward_device(model.ids_, T, {.trace = layers});
  if (slot == 1) std::swap(model.trace_, model.trace_alt_);
  GL_TRY(st);
  if (done) GL_CUDA_CHECK(cudaEventRecord(done, model.stream_));
  return ok_status();
}

// ---- decode -------------------------------------------------------------------------------------

namespace {

// What `enqueue` puts on stream s, captured and instantiated as a CUDA graph (nothing runs).
template <class Enqueue>
Result<cudaGraphExec_t> capture_graph(cudaStream_t s, Enqueue&& enqueue) {
  cudaGraph_t graph;
  GL_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  Status status = enqueue();
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  if (!status.ok()) {
    if (end == cudaSuccess) cudaGraphDestroy(graph);
    return std::move(status).take_error();
  }
  GL_CUDA_CHECK(end);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  GL_CUDA_CHECK(inst);
  return exec;
}

}  // namespace

Result<std::unique_ptr<GpuSequenceCache>> GpuSequenceCache::create(GpuModel& model,
                                                                   long max_context) {
  static std::atomic<uint64_t> serials{0};
  auto cache = std::unique_ptr<GpuSequenceCache>(new GpuSequenceCache());
  cache->model_ = &model;
  cache->mixers_version_ = model.mixers_version_;
  cache->serial_ = ++serials;
  cache->max_context_ = max_context;
  const ModelConfig& c = model.config_;
  const size_t G = c.num_kv_heads, D = c.head_dim;
  cudaStream_t s = model.stream_;
  DeviceArena& m = cache->memory_;
  cache->k_.assign(c.num_layers, nullptr);
  cache->v_.assign(c.num_layers, nullptr);
  cache->hybrid_.assign(c.num_layers, {});
  cache->hybrid_memory_.assign(c.num_layers, nullptr);
  for (int l = 0; l < c.num_layers; ++l) {
    const GpuLayer& L = model.layers_[l];
    if (L.hybrid) {
      const size_t bytes = L.hybrid->cache_bytes();
      GL_ASSIGN_OR_RETURN(void* mem, m.alloc_bytes(bytes));
      cache->hybrid_memory_[l] = mem;
      GL_ASSIGN_OR_RETURN(cache->hybrid_[l], L.hybrid->cache_create(mem, s));
      cache->cache_bytes_ += bytes;
    } else {
      GL_ASSIGN_OR_RETURN(cache->k_[l], m.alloc<bf16>((size_t)max_context * G * D));
      GL_ASSIGN_OR_RETURN(cache->v_[l], m.alloc<bf16>((size_t)max_context * G * D));
      cache->cache_bytes_ += (size_t)max_context * G * D * 2 * 2;
    }
  }
  GL_TRY(cache->state_ready_.create());
  GL_TRY(cache->copied_.create());
  GL_CUDA_CHECK(cudaStreamSynchronize(s));
  return cache;
}

GpuSequenceCache::~GpuSequenceCache() {
  if (copy_pending_) cudaEventSynchronize(copied_.get());  // a copy still reading the caches
}

size_t GpuSequenceCache::bytes() const { return cache_bytes_; }

Status GpuSequenceCache::reset() {
  GL_TRY(order_after_copy());
  for (size_t l = 0; l < hybrid_.size(); ++l)
    if (hybrid_memory_[l]) {
      GL_ASSIGN_OR_RETURN(hybrid_[l], model_->layers_[l].hybrid->cache_create(hybrid_memory_[l],
                                                                              model_->stream_));
    }
  GL_CUDA_CHECK(cudaStreamSynchronize(model_->stream_));
  position_ = 0;
  return ok_status();
}

Status GpuSequenceCache::fill_random(long pos, uint64_t seed) {
  GpuModel& M = *model_;
  const ModelConfig& c = M.config_;
  const size_t H = c.num_heads, G = c.num_kv_heads, D = c.head_dim;
  cudaStream_t s = M.stream_;
  if (M.has_softmax_layers() && pos > max_context_)
    return make_error("fill_random: position ", pos, " beyond the cache");
  GL_TRY(order_after_copy());
  for (int l = 0; l < c.num_layers; ++l) {
    const uint64_t sd = seed * 131 + (uint64_t)l * 17;
    if (M.layers_[l].hybrid) {
      const HybridCacheView& v = hybrid_[l];
      const kc::HybridShape& sh = M.layers_[l].hybrid->kernel_shape();
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
  GpuSequenceCache* one = &cache;
  return gpu_decode_batch(model, &one, &token, 1, logits, next);
}

Status gpu_prefill(GpuModel& model, GpuSequenceCache& cache, const int32_t* tokens, int T,
                   float* last_logits) {
  if (T <= 0) return make_error("gpu prefill: no tokens");
  // An empty cache: the one-prompt case of the packed prefill.
  if (cache.position_ == 0 && T > 1) {
    GpuSequenceCache* caches[] = {&cache};
    return gpu_prefill_batch(model, caches, &tokens, &T, 1, &last_logits);
  }
  for (int t = 0; t < T; ++t)
    GL_TRY(gpu_decode(model, cache, tokens[t], t + 1 == T ? last_logits : nullptr, nullptr));
  return ok_status();
}

Status gpu_prefill_batch(GpuModel& model, GpuSequenceCache* const* caches,
                         const int32_t* const* tokens, const int* lengths, int n,
                         float* const* last_logits) {
  if (n <= 0) return ok_status();
  std::vector<int> sequences(lengths, lengths + n);
  std::vector<int32_t> ids;
  std::vector<GpuRowRange> last_rows;
  for (int i = 0; i < n; ++i) {
    if (lengths[i] <= 0) return make_error("gpu prefill: prompt ", i, " has no tokens");
    ids.insert(ids.end(), tokens[i], tokens[i] + lengths[i]);
    last_rows.push_back({(int)ids.size() - 1, 1});
  }
  const int T = (int)ids.size();
  const size_t V = model.config_.vocab_size;
  GL_TRY(model.ensure_scratch(T, false));
  GL_TRY(model.reserve_logits(n));
  cudaStream_t s = model.stream_;
  GL_CUDA_CHECK(cudaMemcpyAsync(model.ids_, ids.data(), (size_t)T * 4, cudaMemcpyHostToDevice, s));
  GL_TRY(model.forward_device(model.ids_, T,
                              {.logits = model.logits_, .sequences = sequences,
                               .caches = std::span<GpuSequenceCache* const>(caches, n),
                               .logit_rows = last_rows}));
  for (int i = 0; i < n; ++i)
    if (last_logits[i])
      GL_CUDA_CHECK(cudaMemcpyAsync(last_logits[i], model.logits_ + i * V, V * 4,
                                    cudaMemcpyDeviceToHost, s));
  GL_CUDA_CHECK(cudaStreamSynchronize(s));
  return ok_status();
}

}  // namespace golinear::model::cuda

namespace golinear::model::cuda {

// ---- decode of a batch --------------------------------------------------------------------------

namespace {

Status batch_step_reserve(GpuModel& model, std::unique_ptr<GpuBatchStep>& step, int B) {
  if (step && step->capacity >= B) return ok_status();
  const ModelConfig& c = model.config();
  int cap = 8;
  while (cap < B) cap *= 2;
  step = std::make_unique<GpuBatchStep>();  // new buffers: graphs and tables start over
  GpuBatchStep& b = *step;
  b.capacity = cap;
  const size_t n = cap, C = c.hidden_size, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim,
               F = c.intermediate_size, V = c.vocab_size, L = c.num_layers;
  DeviceArena& a = b.memory;
  GL_ASSIGN_OR_RETURN(b.ids, a.alloc<int32_t>(n));
  GL_ASSIGN_OR_RETURN(b.next, a.alloc<int32_t>(n));
  GL_ASSIGN_OR_RETURN(b.positions, a.alloc<long>(2 * n));
  GL_ASSIGN_OR_RETURN(b.h, a.alloc<float>(n * C));
  GL_ASSIGN_OR_RETURN(b.qkv32, a.alloc<float>(n * (H + 2 * G) * D));
  GL_ASSIGN_OR_RETURN(b.logits, a.alloc<float>(n * V));
  GL_ASSIGN_OR_RETURN(b.xn, a.alloc<bf16>(n * C));
  GL_ASSIGN_OR_RETURN(b.qkv, a.alloc<bf16>(n * (H + 2 * G) * D));
  GL_ASSIGN_OR_RETURN(b.qr, a.alloc<bf16>(n * H * D));
  GL_ASSIGN_OR_RETURN(b.y, a.alloc<bf16>(n * H * D));
  GL_ASSIGN_OR_RETURN(b.xn2, a.alloc<bf16>(n * C));
  GL_ASSIGN_OR_RETURN(b.gu, a.alloc<bf16>(n * 2 * F));
  GL_ASSIGN_OR_RETURN(b.act, a.alloc<bf16>(n * F));
  if (model.lora()) { GL_ASSIGN_OR_RETURN(b.lora_u, a.alloc<bf16>(n * 3 * (size_t)model.lora()->rank())); }
  GL_ASSIGN_OR_RETURN(b.views, a.alloc<HybridCacheView>(L * n));
  GL_ASSIGN_OR_RETURN(b.kv_rows, a.alloc<bf16*>(L * 2 * n));
  return ok_status();
}

}  // namespace

Status gpu_decode_batch(GpuModel& model, GpuSequenceCache* const* caches, const int32_t* ids,
                        int B, float* logits, int32_t* next) {
  if (B <= 0) return make_error("gpu decode batch: no sequences");
  const ModelConfig& c = model.config_;
  const int C = c.hidden_size, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim,
            V = c.vocab_size, L = c.num_layers;
  const bool softmax = model.has_softmax_layers();
  long max_length = 0;
  std::vector<long> positions(2 * (size_t)B);
  for (int b = 0; b < B; ++b) {
    const GpuSequenceCache* cache = caches[b];
    if (!cache || !cache->made_for(model))
      return make_error("gpu decode batch: sequence ", b, "'s cache belongs to another model or "
                        "to its mixers before they changed");
    for (int o = 0; o < b; ++o)
      if (caches[o] == cache) return make_error("gpu decode batch: sequence ", b, " repeats ", o);
    if (softmax && cache->position_ >= cache->max_context_)
      return make_error("gpu decode batch: sequence ", b, "'s cache of ", cache->max_context_,
                        " tokens is full");
    positions[b] = cache->position_;
    positions[B + b] = cache->position_ + 1;
    max_length = std::max(max_length, cache->position_ + 1);
  }
  GL_TRY(batch_step_reserve(model, model.batch_step_, B));
  GpuBatchStep& st = *model.batch_step_;
  const size_t cap = st.capacity;
  cudaStream_t s = model.stream_;
  for (int b = 0; b < B; ++b) GL_TRY(caches[b]->order_after_copy());

  // The tables: rebuilt when the batch holds other caches (or the same in another order).
  std::vector<uint64_t> batch(B);
  for (int b = 0; b < B; ++b) batch[b] = caches[b]->serial_;
  if (st.tables_of != batch) {
    std::vector<HybridCacheView> views(L * cap);
    std::vector<bf16*> rows(L * 2 * cap, nullptr);
    for (int l = 0; l < L; ++l)
      for (int b = 0; b < B; ++b) {
        views[l * cap + b] = caches[b]->hybrid_[l];
        rows[(l * 2) * cap + b] = caches[b]->k_[l];
        rows[(l * 2 + 1) * cap + b] = caches[b]->v_[l];
      }
    GL_CUDA_CHECK(cudaMemcpyAsync(st.views, views.data(), views.size() * sizeof(HybridCacheView),
                                  cudaMemcpyHostToDevice, s));
    GL_CUDA_CHECK(cudaMemcpyAsync(st.kv_rows, rows.data(), rows.size() * sizeof(bf16*),
                                  cudaMemcpyHostToDevice, s));
    st.tables_of = batch;
  }
  GL_CUDA_CHECK(cudaMemcpyAsync(st.ids, ids, (size_t)B * 4, cudaMemcpyHostToDevice, s));
  long* lengths = st.positions + cap;
  DecodeGraphKey key{B, {}};
  if (softmax) {
    GL_CUDA_CHECK(cudaMemcpyAsync(st.positions, positions.data(), (size_t)B * sizeof(long),
                                  cudaMemcpyHostToDevice, s));
    GL_CUDA_CHECK(cudaMemcpyAsync(lengths, positions.data() + B, (size_t)B * sizeof(long),
                                  cudaMemcpyHostToDevice, s));
    const size_t ws = kc::attention_decode_workspace_bytes(B, H, G, D, max_length);
    if (ws > st.attn_ws_bytes) {
      GL_CUDA_CHECK(cudaStreamSynchronize(s));  // the old workspace may still be in use
      st.drop_graphs();                         // and the graphs name it
      st.attn_memory.clear();
      GL_ASSIGN_OR_RETURN(st.attn_ws, st.attn_memory.alloc_bytes(ws));
      st.attn_ws_bytes = ws;
    }
    key.split = kc::attention_decode_split(B, G, D, max_length);
  }

  // The mixers' inputs q (B, H·D), k1, v1 (B, G·D) one after the other: at B = 1 the row
  // [q k v] that block_input's one-row product writes itself.
  bf16* const q = st.qkv;
  bf16* const k1 = q + (size_t)B * H * D;
  bf16* const v1 = k1 + (size_t)B * G * D;
  // The step's first kernel is an ordinary launch (it starts after all work before it on the
  // stream) and only each layer's decode kernel writes that layer's caches: so each may be
  // launched dependent, reading its cache before the qkv product ends (HybridDecodeLaunch).
  const kc::HybridDecodeLaunch hybrid_launch{.column_splits = 0, .dependent = true};
  auto enqueue = [&]() -> Status {
    GL_TRY(kc::embed_gather(st.h, model.embed_, st.ids, B, C, s));
    for (int l = 0; l < L; ++l) {
      const GpuLayer& Ly = model.layers_[l];
      GL_TRY(model.block_input(Ly, st.h, B, st.xn, q, k1, v1, st.qkv32, s, nullptr,
                               nullptr, st.lora_u));
      if (Ly.hybrid) {
        GL_TRY(Ly.hybrid->decode_step(st.y, st.views + l * cap, B, st.xn, q, k1, v1, s,
                                      hybrid_launch));
      } else {
        bf16* const* k_rows = st.kv_rows + (l * 2) * cap;
        bf16* const* v_rows = st.kv_rows + (l * 2 + 1) * cap;
        GL_CUDA_CHECK(cudaMemcpyAsync(st.qr, q, (size_t)B * H * D * 2, cudaMemcpyDeviceToDevice, s));
        GL_TRY(kc::rope_apply_at(st.qr, model.inv_freq_, B, H, D, st.positions, s));
        GL_TRY(kc::rope_apply_at(k1, model.inv_freq_, B, G, D, st.positions, s));
        GL_TRY(kc::kv_cache_append(k_rows, v_rows, k1, v1, st.positions, B, G, D, s));
        GL_TRY(kc::attention_decode_batch(st.y, st.qr, k_rows, v_rows, lengths, B, max_length, H,
                                          G, D, st.attn_ws, st.attn_ws_bytes, s));
      }
      GL_TRY(model.block_output(Ly, st.h, st.y, B, st.xn2, st.gu, st.act, s, nullptr, st.lora_u));
    }
    GL_TRY(model.head_logits(st.h, B, st.logits, st.xn2, s));
    return kc::argmax_rows(st.next, st.logits, B, V, s);
  };

  cudaGraphExec_t exec = st.graph(key);
  if (!exec && st.capture(key)) {
    GL_CUDA_CHECK(cudaStreamSynchronize(s));  // no graph runs while one is dropped (add_graph)
    GL_ASSIGN_OR_RETURN(exec, capture_graph(s, enqueue));
    st.add_graph(key, exec);
  }
  if (exec) {
    GL_CUDA_CHECK(cudaGraphLaunch(exec, s));
  } else {
    GL_TRY(enqueue());
  }
  if (logits)
    GL_CUDA_CHECK(cudaMemcpyAsync(logits, st.logits, (size_t)B * V * 4, cudaMemcpyDeviceToHost, s));
  if (next) GL_CUDA_CHECK(cudaMemcpyAsync(next, st.next, (size_t)B * 4, cudaMemcpyDeviceToHost, s));
  GL_CUDA_CHECK(cudaStreamSynchronize(s));
  for (int b = 0; b < B; ++b) caches[b]->position_ += 1;
  return ok_status();
}

// ---- snapshots ----------------------------------------------------------------------------------

size_t GpuSequenceCache::state_bytes(long position) const {
  const GpuModel& M = *model_;
  const ModelConfig& c = M.config_;
  const size_t row = (size_t)c.num_kv_heads * c.head_dim * 2;
  size_t total = 0;
  for (int l = 0; l < c.num_layers; ++l)
    total += hybrid_memory_[l] ? M.layers_[l].hybrid->cache_bytes() : 2 * row * position;
  return total;
}

Status GpuSequenceCache::copy_state_out(char* out, cudaStream_t s) const {
  const GpuModel& M = *model_;
  const ModelConfig& c = M.config_;
  const size_t row = (size_t)c.num_kv_heads * c.head_dim * 2;
  for (int l = 0; l < c.num_layers; ++l) {
    if (hybrid_memory_[l]) {
      const size_t n = M.layers_[l].hybrid->cache_bytes();
      GL_CUDA_CHECK(cudaMemcpyAsync(out, hybrid_memory_[l], n, cudaMemcpyDeviceToHost, s));
      out += n;
    } else {
      GL_CUDA_CHECK(cudaMemcpyAsync(out, k_[l], row * position_, cudaMemcpyDeviceToHost, s));
      GL_CUDA_CHECK(cudaMemcpyAsync(out + row * position_, v_[l], row * position_,
                                    cudaMemcpyDeviceToHost, s));
      out += 2 * row * position_;
    }
  }
  return ok_status();
}

Status GpuSequenceCache::order_after_copy() {
  if (!copy_pending_) return ok_status();
  GL_CUDA_CHECK(cudaStreamWaitEvent(model_->stream_, copied_.get(), 0));
  copy_pending_ = false;  // everything enqueued on the model's stream from now on is after it
  return ok_status();
}

Status GpuSequenceCache::save(std::vector<char>* bytes) const {
  bytes->resize(state_bytes(position_));
  cudaStream_t s = model_->stream_;
  GL_TRY(copy_state_out(bytes->data(), s));
  GL_CUDA_CHECK(cudaStreamSynchronize(s));
  return ok_status();
}

Status GpuSequenceCache::save_async(char* host, cudaStream_t copy_stream, cudaEvent_t done) {
  GL_CUDA_CHECK(cudaEventRecord(state_ready_.get(), model_->stream_));
  GL_CUDA_CHECK(cudaStreamWaitEvent(copy_stream, state_ready_.get(), 0));
  GL_TRY(copy_state_out(host, copy_stream));
  GL_CUDA_CHECK(cudaEventRecord(done, copy_stream));
  GL_CUDA_CHECK(cudaEventRecord(copied_.get(), copy_stream));
  copy_pending_ = true;
  return ok_status();
}

Status GpuSequenceCache::restore(std::span<const char> bytes, long position) {
  const GpuModel& M = *model_;
  const ModelConfig& c = M.config_;
  if (position < 0 || (M.has_softmax_layers() && position > max_context_))
    return make_error("gpu cache restore: a state of ", position, " tokens does not fit a cache of ",
                      max_context_);
  const size_t row = (size_t)c.num_kv_heads * c.head_dim * 2;
  const size_t total = state_bytes(position);
  if (total != bytes.size())
    return make_error("gpu cache restore: ", bytes.size(), " bytes, this model's state of ",
                      position, " tokens has ", total);
  GL_TRY(order_after_copy());
  const char* in = bytes.data();
  cudaStream_t s = M.stream_;
  for (int l = 0; l < c.num_layers; ++l) {
    if (hybrid_memory_[l]) {
      const size_t n = M.layers_[l].hybrid->cache_bytes();
      GL_CUDA_CHECK(cudaMemcpyAsync(hybrid_memory_[l], in, n, cudaMemcpyHostToDevice, s));
      in += n;
    } else {
      GL_CUDA_CHECK(cudaMemcpyAsync(k_[l], in, row * position, cudaMemcpyHostToDevice, s));
      GL_CUDA_CHECK(cudaMemcpyAsync(v_[l], in + row * position, row * position,
                                    cudaMemcpyHostToDevice, s));
      in += 2 * row * position;
    }
  }
  GL_CUDA_CHECK(cudaStreamSynchronize(s));
  position_ = position;
  return ok_status();
}

}  // namespace golinear::model::cuda
