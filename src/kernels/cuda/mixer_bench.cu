// The mixer benchmark (mixer_bench.h).
#include "kernels/cuda/mixer_bench.h"
#include "kernels/cuda/norm.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <sstream>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_timing.h"
#include "kernels/cuda/gated_delta.h"
#include "kernels/cuda/gated_linear.h"
#include "kernels/cuda/hybrid.h"

namespace golinear::kernels::cuda {

namespace {

__device__ float hash_uniform(unsigned long long i, unsigned long long seed) {
  unsigned long long z = i * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (z >> 40) * (1.0f / 16777216.0f);
}
__global__ void fill_bf16_kernel(bf16* p, size_t n, unsigned long long seed, float lo, float hi) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = __float2bfloat16(lo + (hi - lo) * hash_uniform(i, seed));
}
__global__ void fill_f32_kernel(float* p, size_t n, unsigned long long seed, float lo, float hi) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = lo + (hi - lo) * hash_uniform(i, seed);
}
Status fill(bf16* p, size_t n, unsigned long long seed, float lo, float hi) {
  fill_bf16_kernel<<<1024, 256>>>(p, n, seed, lo, hi);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}
Status fill(float* p, size_t n, unsigned long long seed, float lo, float hi) {
  fill_f32_kernel<<<1024, 256>>>(p, n, seed, lo, hi);
  GL_CUDA_CHECK_LAUNCH();
  return ok_status();
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

struct Row {
  std::string mixer, measure;
  long T;
  double value;  // ms, or bytes for cache rows; < 0: not measured
  std::string note;
};

}  // namespace

Result<MixerBenchOptions> mixer_bench_parse(const std::vector<std::string>& argv) {
  MixerBenchOptions o;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    auto value = [&]() -> Result<std::string> {
      if (i + 1 >= argv.size()) return make_error("bench: ", a, " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--json") o.json = true;
      else if (a == "--no-backward") o.backward = false;
      else if (a == "--seq") { GL_ASSIGN_OR_RETURN(auto v, value()); o.seq_lens.clear(); for (auto& x : split_commas(v)) o.seq_lens.push_back(std::stoi(x)); }
      else if (a == "--contexts") { GL_ASSIGN_OR_RETURN(auto v, value()); o.contexts.clear(); for (auto& x : split_commas(v)) o.contexts.push_back(std::stol(x)); }
      else if (a == "--repeats") { GL_ASSIGN_OR_RETURN(auto v, value()); o.repeats = std::stoi(v); }
      else if (a == "--warmups") { GL_ASSIGN_OR_RETURN(auto v, value()); o.warmups = std::stoi(v); }
      else if (a == "--value-block") { GL_ASSIGN_OR_RETURN(auto v, value()); o.value_block = std::stoi(v); }
      else if (a == "--heads") { GL_ASSIGN_OR_RETURN(auto v, value()); o.H = std::stoi(v); }
      else if (a == "--kv-heads") { GL_ASSIGN_OR_RETURN(auto v, value()); o.G = std::stoi(v); }
      else if (a == "--head-dim") { GL_ASSIGN_OR_RETURN(auto v, value()); o.D = std::stoi(v); }
      else if (a == "--hidden") { GL_ASSIGN_OR_RETURN(auto v, value()); o.C = std::stoi(v); }
      else return make_error("bench: unknown option ", a);
    } catch (const std::exception&) {
      return make_error("bench: bad number after ", a);
    }
  }
  if (o.repeats < 1 || o.warmups < 0 || o.H % o.G != 0)
    return make_error("bench: need repeats ≥ 1, warmups ≥ 0 and kv heads dividing heads");
  return o;
}

Result<std::string> mixer_bench_run(const MixerBenchOptions& o) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    return make_error("bench: no CUDA device visible (it needs a GPU; this build has the CUDA backend)");
  cudaStream_t stream = 0;
  cublasHandle_t cublas;
  if (cublasCreate(&cublas) != CUBLAS_STATUS_SUCCESS) return make_error("bench: cublasCreate failed");
  cudaDeviceProp prop;
  GL_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int H = o.H, G = o.G, D = o.D, C = o.C;
  std::vector<Row> rows;
  const int T_max = *std::max_element(o.seq_lens.begin(), o.seq_lens.end());

  DeviceBuffer<bf16> x, q, k, v, y, qn, kn, dout;
  DeviceBuffer<float> g, beta, lse;
  GL_TRY(x.allocate((size_t)T_max * C));
  GL_TRY(q.allocate((size_t)T_max * H * D));
  GL_TRY(qn.allocate((size_t)T_max * H * D));
  GL_TRY(y.allocate((size_t)T_max * H * D));
  GL_TRY(dout.allocate((size_t)T_max * H * D));
  GL_TRY(k.allocate((size_t)T_max * G * D));
  GL_TRY(kn.allocate((size_t)T_max * G * D));
  GL_TRY(v.allocate((size_t)T_max * G * D));
  GL_TRY(g.allocate((size_t)T_max * H));
  GL_TRY(beta.allocate((size_t)T_max * H));
  GL_TRY(lse.allocate((size_t)T_max * H));
  GL_TRY(fill(x.get(), x.size(), 1, -1, 1));
  GL_TRY(fill(q.get(), q.size(), 2, -1, 1));
  GL_TRY(fill(k.get(), k.size(), 3, -1, 1));
  GL_TRY(fill(v.get(), v.size(), 4, -1, 1));
  GL_TRY(fill(dout.get(), dout.size(), 5, -1, 1));
  GL_TRY(fill(g.get(), g.size(), 6, -0.1f, -0.001f));
  GL_TRY(fill(beta.get(), beta.size(), 7, 0.05f, 0.95f));
  GL_TRY(unit_rows_forward(qn.get(), q.get(), (long)T_max * H, D, stream));
  GL_TRY(unit_rows_forward(kn.get(), k.get(), (long)T_max * G, D, stream));

  // Hybrid parameters (random, realistic ranges).
  DeviceBuffer<float> conv_q, conv_k, conv_v, b_beta, A_log, dt_bias, b_lambda, inv_freq;
  DeviceBuffer<bf16> w_gates;
  GL_TRY(conv_q.allocate((size_t)H * D * 4));
  GL_TRY(conv_k.allocate((size_t)G * D * 4));
  GL_TRY(conv_v.allocate((size_t)G * D * 4));
  GL_TRY(w_gates.allocate((size_t)3 * H * C));
  for (auto* b : {&b_beta, &A_log, &dt_bias, &b_lambda}) GL_TRY(b->allocate(H));
  GL_TRY(inv_freq.allocate(D / 2));
  GL_TRY(fill(conv_q.get(), conv_q.size(), 11, -0.5f, 0.5f));
  GL_TRY(fill(conv_k.get(), conv_k.size(), 12, -0.5f, 0.5f));
  GL_TRY(fill(conv_v.get(), conv_v.size(), 13, -0.5f, 0.5f));
  GL_TRY(fill(w_gates.get(), w_gates.size(), 14, -0.02f, 0.02f));
  GL_TRY(fill(b_beta.get(), H, 15, -1, 1));
  GL_TRY(fill(A_log.get(), H, 16, 0, 2.7f));
  GL_TRY(fill(dt_bias.get(), H, 17, -5, -2));
  GL_TRY(fill(b_lambda.get(), H, 18, -2, -2));
  GL_TRY(fill(inv_freq.get(), D / 2, 19, 1e-4f, 1.0f));
  HybridParams params{conv_q.get(), conv_k.get(), conv_v.get(), w_gates.get(), b_beta.get(),
                      A_log.get(), dt_bias.get(), b_lambda.get(), inv_freq.get()};
  HybridShape shape{C, H, G, D, o.sinks, o.window};

  DeviceBuffer<char> workspace;
  size_t ws_bytes = std::max({gated_delta_forward_workspace_bytes(T_max, H, D, false),
                              hybrid_forward_workspace_bytes(shape, T_max),
                              o.backward ? gated_delta_backward_workspace_bytes(T_max, H, D) : 0});
  GL_TRY(workspace.allocate(ws_bytes));
  DeviceBuffer<float> dq, dk, dv, dg, dbeta;
  DeviceBuffer<float> attn_dy;  // attention fwd+bwd rows: fp32 dy and the backward's workspace
  DeviceBuffer<char> attn_ws;
  if (o.backward) {
    GL_TRY(dq.allocate((size_t)T_max * H * D));
    GL_TRY(dk.allocate((size_t)T_max * G * D));
    GL_TRY(dv.allocate((size_t)T_max * G * D));
    GL_TRY(dg.allocate((size_t)T_max * H));
    GL_TRY(dbeta.allocate((size_t)T_max * H));
    GL_TRY(attn_dy.allocate((size_t)T_max * H * D));
    GL_TRY(fill(attn_dy.get(), attn_dy.size(), 8, -1, 1));
    GL_TRY(attn_ws.allocate(attention_backward_workspace_bytes(T_max, H, G, D)));
  }

  // GLA (diagonal decay, Dk = Dv = D, one state per query head): g (T, H, D) fp32 in (−0.1, 0).
  DeviceBuffer<float> gla_g, gla_dq, gla_dk, gla_dv, gla_dg;
  DeviceBuffer<char> gla_ws;
  GL_TRY(gla_g.allocate((size_t)T_max * H * D));
  GL_TRY(fill(gla_g.get(), gla_g.size(), 41, -0.1f, -0.001f));
  GL_TRY(gla_ws.allocate(o.backward ? gated_linear_backward_workspace_bytes(T_max, H, D, D)
                                    : gated_linear_forward_workspace_bytes(T_max, H, D, D)));
  if (o.backward)
    for (auto* b : {&gla_dq, &gla_dk, &gla_dv, &gla_dg}) GL_TRY(b->allocate((size_t)T_max * H * D));

  for (int T : o.seq_lens) {
    GL_ASSIGN_OR_RETURN(double full, time_median([&] {
      return attention_forward(y.get(), nullptr, q.get(), k.get(), v.get(), T, H, G, D, {}, stream);
    }, o.warmups, o.repeats, stream));
    rows.push_back({"full attention (ours, mma flash)", "prefill fwd ms", T, full, ""});
    GL_ASSIGN_OR_RETURN(double swa, time_median([&] {
      return attention_forward(y.get(), lse.get(), q.get(), k.get(), v.get(), T, H, G, D,
                               AttentionMaskSpec{o.sinks, o.window}, stream);
    }, o.warmups, o.repeats, stream));
    rows.push_back({"sink+window attention", "prefill fwd ms", T, swa, ""});
    if (o.backward) {  // attention fwd (with lse) + bwd, both masks
      for (const bool full_causal : {false, true}) {
        const AttentionMaskSpec m = full_causal ? AttentionMaskSpec{} : AttentionMaskSpec{o.sinks, o.window};
        GL_ASSIGN_OR_RETURN(double fb, time_median([&]() -> Status {
          GL_TRY(attention_forward(y.get(), lse.get(), q.get(), k.get(), v.get(), T, H, G, D, m, stream));
          return attention_backward(dq.get(), dk.get(), dv.get(), attn_dy.get(), y.get(), lse.get(),
                                    q.get(), k.get(), v.get(), T, H, G, D, m, attn_ws.get(),
                                    attn_ws.size(), stream);
        }, std::min(o.warmups, 2), std::min(o.repeats, 5), stream));
        rows.push_back({full_causal ? "full attention (ours, mma flash)" : "sink+window attention",
                        "fwd+bwd ms", T, fb, "deterministic backward; median of 5"});
      }
    }
    GL_ASSIGN_OR_RETURN(double gdn, time_median([&] {
      return gated_delta_chunked_forward(y.get(), nullptr, nullptr, qn.get(), kn.get(), v.get(),
                                         g.get(), beta.get(), T, H, G, D, workspace.get(),
                                         ws_bytes, stream, nullptr, o.value_block);
    }, o.warmups, o.repeats, stream));
    rows.push_back({"gated deltanet (chunked)", "prefill fwd ms", T, gdn, ""});
    if (o.backward) {
      GL_ASSIGN_OR_RETURN(double gdn_bwd, time_median([&] {
        return gated_delta_backward(dq.get(), dk.get(), dv.get(), dg.get(), dbeta.get(),
                                    dout.get(), qn.get(), kn.get(), v.get(), g.get(), beta.get(),
                                    T, H, G, D, workspace.get(), ws_bytes, stream);
      }, std::min(o.warmups, 1), std::min(o.repeats, 3), stream));
      rows.push_back({"gated deltanet (chunked)", "fwd+bwd ms", T, gdn_bwd,
                      "backward recomputes the forward; median of 3"});
    }
    {  // GLA: q, k, v (T, H, D) (keys from the query buffer's unit rows: H heads, no GQA)
      GL_ASSIGN_OR_RETURN(double gla, time_median([&] {
        return gated_linear_chunked_forward(y.get(), nullptr, nullptr, qn.get(), qn.get(), dout.get(),
                                            gla_g.get(), T, H, D, D, gla_ws.get(), gla_ws.size(),
                                            stream);
      }, o.warmups, o.repeats, stream));
      rows.push_back({"gla (chunked, diagonal decay)", "prefill fwd ms", T, gla, "Dk = Dv = D, H heads"});
      if (o.backward) {
        GL_ASSIGN_OR_RETURN(double gla_fb, time_median([&]() -> Status {
          GL_TRY(gated_linear_chunked_forward(y.get(), nullptr, nullptr, qn.get(), qn.get(), dout.get(),
                                              gla_g.get(), T, H, D, D, gla_ws.get(), gla_ws.size(),
                                              stream));
          return gated_linear_backward(gla_dq.get(), gla_dk.get(), gla_dv.get(), gla_dg.get(),
                                       dout.get(), qn.get(), qn.get(), dout.get(), gla_g.get(), T,
                                       H, D, D, gla_ws.get(), gla_ws.size(), stream);
        }, std::min(o.warmups, 1), std::min(o.repeats, 3), stream));
        rows.push_back({"gla (chunked, diagonal decay)", "fwd+bwd ms", T, gla_fb,
                        "forward + backward (recomputes states); median of 3"});
      }
    }
    GL_ASSIGN_OR_RETURN(double hyb, time_median([&] {
      return hybrid_forward(y.get(), nullptr, shape, params, x.get(), q.get(), k.get(), v.get(),
                            T, workspace.get(), ws_bytes, cublas, stream);
    }, o.warmups, o.repeats, stream));
    rows.push_back({"hybrid (gdn + 8 sinks + 56 window, gate, conv)", "prefill fwd ms", T, hyb,
                    "conv+rope+norm, gate GEMM, gdn, exact branch + mix (fused)"});
    {  // stage breakdown of the hybrid forward (median of 5 event-timed runs per stage)
      std::vector<float> st[4];
      for (int r = 0; r < 5; ++r) {
        float ms[4] = {0, 0, 0, 0};
        GL_TRY(hybrid_forward_stage_ms(ms, y.get(), shape, params, x.get(), q.get(), k.get(),
                                       v.get(), T, workspace.get(), ws_bytes, cublas, stream));
        for (int i = 0; i < 4; ++i) st[i].push_back(ms[i]);
      }
      const char* names[4] = {"hybrid stage: rope table + conv/rope/norm", "hybrid stage: gate gemm + gates",
                              "hybrid stage: gdn (linear branch)", "hybrid stage: attention + mix"};
      for (int i = 0; i < 4; ++i) {
        std::sort(st[i].begin(), st[i].end());
        rows.push_back({names[i], "prefill fwd ms", T, st[i][2], "events between stages, median of 5"});
      }
    }
  }

  // Decode: full attention over a KV cache vs the hybrid's constant cache.
  const long ctx_max = *std::max_element(o.contexts.begin(), o.contexts.end());
  {
    DeviceBuffer<bf16> kc, vc, q1, y1;
    GL_TRY(kc.allocate((size_t)ctx_max * G * D));
    GL_TRY(vc.allocate((size_t)ctx_max * G * D));
    GL_TRY(q1.allocate((size_t)H * D));
    GL_TRY(y1.allocate((size_t)H * D));
    GL_TRY(fill(kc.get(), kc.size(), 21, -1, 1));
    GL_TRY(fill(vc.get(), vc.size(), 22, -1, 1));
    GL_TRY(fill(q1.get(), q1.size(), 23, -1, 1));
    DeviceBuffer<char> dws;
    const size_t dws_bytes = attention_decode_workspace_bytes(H, D, ctx_max);
    GL_TRY(dws.allocate(dws_bytes));
    for (long ctx : o.contexts) {
      GL_ASSIGN_OR_RETURN(double t, time_median([&] {
        return attention_decode(y1.get(), q1.get(), kc.get(), vc.get(), ctx, H, G, D, dws.get(),
                                dws_bytes, stream);
      }, o.warmups, o.repeats * 10, stream));
      rows.push_back({"full attention (ours, split-K decode)", "decode step ms", ctx, t, "2 launches, no graph"});
      rows.push_back({"full attention", "cache bytes/layer", ctx, (double)ctx * G * D * 2 * 2, "bf16 K and V"});
    }
  }
  {
    DeviceBuffer<char> cache_mem;
    GL_TRY(cache_mem.allocate(hybrid_cache_bytes(shape)));
    GL_ASSIGN_OR_RETURN(HybridCacheView cache, hybrid_cache_create(shape, cache_mem.get(), stream));
    GL_TRY(fill(cache.state, (size_t)H * D * D, 31, -0.05f, 0.05f));
    GL_TRY(fill(cache.ring_k, (size_t)(o.window + 1) * G * D, 32, -1, 1));
    GL_TRY(fill(cache.ring_v, (size_t)(o.window + 1) * G * D, 33, -1, 1));
    GL_TRY(fill(cache.ring_key, (size_t)(o.window + 1) * G * D, 34, -0.1f, 0.1f));
    GL_TRY(fill(cache.ring_g, (size_t)(o.window + 1) * H, 35, -0.1f, -0.001f));
    GL_TRY(fill(cache.ring_beta, (size_t)(o.window + 1) * H, 36, 0.05f, 0.95f));
    GL_TRY(fill(cache.sink_k, (size_t)std::max(1, o.sinks) * G * D, 37, -1, 1));
    GL_TRY(fill(cache.sink_v, (size_t)std::max(1, o.sinks) * G * D, 38, -1, 1));
    // 32 decode steps of one layer per graph: what a token of a 32-layer model launches.
    constexpr int kSteps = 32;
    for (long ctx : o.contexts) {
      const long pos = ctx;
      GL_CUDA_CHECK(cudaMemcpy(cache.position, &pos, sizeof(long), cudaMemcpyHostToDevice));
      cudaStream_t capture;
      GL_CUDA_CHECK(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking));
      cudaGraph_t graph;
      GL_CUDA_CHECK(cudaStreamBeginCapture(capture, cudaStreamCaptureModeThreadLocal));
      for (int s = 0; s < kSteps; ++s) {
        Status st = hybrid_decode_step(y.get(), shape, params, cache, x.get(), q.get(), k.get(),
                                       v.get(), capture);
        if (!st.ok()) {
          cudaStreamEndCapture(capture, &graph);
          return std::move(st).take_error();
        }
      }
      GL_CUDA_CHECK(cudaStreamEndCapture(capture, &graph));
      cudaGraphExec_t exec;
      GL_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      GL_ASSIGN_OR_RETURN(double t, time_median([&]() -> Status {
        GL_CUDA_CHECK(cudaMemcpyAsync(cache.position, &pos, sizeof(long), cudaMemcpyHostToDevice, capture));
        GL_CUDA_CHECK(cudaGraphLaunch(exec, capture));
        return ok_status();
      }, o.warmups, o.repeats, capture));
      GL_CUDA_CHECK(cudaGraphExecDestroy(exec));
      GL_CUDA_CHECK(cudaGraphDestroy(graph));
      GL_CUDA_CHECK(cudaStreamDestroy(capture));
      rows.push_back({"hybrid (fused step, CUDA graph)", "decode step ms", ctx, t / kSteps,
                      "1 launch/step; graph of 32 steps / 32"});
      rows.push_back({"hybrid", "cache bytes/layer", ctx, (double)hybrid_cache_bytes(shape),
                      "state fp32 + sinks + ring + conv, constant"});
    }
  }
  cublasDestroy(cublas);

  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::ostringstream out;
  if (o.json) {
    out << "{\"date\": \"" << date << "\", \"gpu\": \"" << prop.name << "\", \"H\": " << H
        << ", \"G\": " << G << ", \"D\": " << D << ", \"C\": " << C << ", \"rows\": [";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      out << (i ? ", " : "") << "{\"mixer\": \"" << r.mixer << "\", \"measure\": \"" << r.measure
          << "\", \"T\": " << r.T << ", \"value\": " << r.value << ", \"note\": \"" << r.note
          << "\"}";
    }
    out << "]}\n";
  } else {
    out << "golinear bench — " << prop.name << ", " << date << ", B=1 H=" << H << " G=" << G
        << " D=" << D << " C=" << C << ", median of " << o.repeats << " after " << o.warmups
        << " warm-ups (CUDA events)\n";
    char line[512];
    std::snprintf(line, sizeof line, "%-48s %-18s %9s %14s  %s\n", "mixer", "measure", "T/ctx",
                  "value", "note");
    out << line;
    for (const Row& r : rows) {
      if (r.measure == "cache bytes/layer")
        std::snprintf(line, sizeof line, "%-48s %-18s %9ld %11.2f MiB  %s\n", r.mixer.c_str(),
                      r.measure.c_str(), r.T, r.value / (1024.0 * 1024.0), r.note.c_str());
      else
        std::snprintf(line, sizeof line, "%-48s %-18s %9ld %14.4f  %s\n", r.mixer.c_str(),
                      r.measure.c_str(), r.T, r.value, r.note.c_str());
      out << line;
    }
  }
  return out.str();
}

}  // namespace golinear::kernels::cuda
