// The mixer benchmark (mixer_bench.h).
#include "bench/cuda/mixer_bench.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/random_fill.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <sstream>

#include "bench/cuda/cuda_timing.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/gated_delta.h"
#include "kernels/cuda/gated_linear.h"
#include "kernels/cuda/hybrid.h"
#include "mixers/cuda/hybrid_mixer.h"
#include "mixers/mixer_factory.h"

namespace golinear::bench::cuda {

using namespace golinear::kernels::cuda;

namespace {

// Uniform random inputs in [lo, hi), kernels/cuda/random_fill on the default stream.
Status fill(bf16* p, size_t n, unsigned long long seed, float lo, float hi) {
  return fill_uniform_bf16(p, n, seed, lo, hi, 0);
}
Status fill(float* p, size_t n, unsigned long long seed, float lo, float hi) {
  return fill_uniform_f32(p, n, seed, lo, hi, 0);
}

struct Row {
  std::string mixer, measure;
  long T;
  double value;  // ms, or bytes for cache rows; < 0: not measured
  std::string note;
};

}  // namespace

Result<std::string> mixer_bench_run(const MixerBenchOptions& o) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    return make_error("bench: no CUDA device visible (it needs a GPU; this build has the CUDA backend)");
  cudaStream_t stream = 0;
  cublasHandle_t cublas;
  GL_CUBLAS_CHECK(cublasCreate(&cublas));
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

  // The hybrid mixer of the default recipe (o.sinks, o.window), initialised as the CPU mixer
  // initialises it (mixers::mixer_create), RoPE frequencies of θ = 500000.
  mixers::MixerOptions recipe;
  recipe.sinks = o.sinks;
  recipe.window = o.window;
  recipe.mix = o.mix;
  const mixers::AttentionShape ashape{C, H, G, D};
  std::vector<float> inv_freq_host(D / 2);
  for (int i = 0; i < D / 2; ++i) inv_freq_host[i] = (float)std::pow(500000.0, -2.0 * i / D);
  GL_ASSIGN_OR_RETURN(std::unique_ptr<mixers::Mixer> cpu_mixer, mixers::mixer_create(recipe, ashape, 1));
  DeviceBuffer<float> mixer_values;
  GL_TRY(mixer_values.allocate(mixers::cuda::hybrid_parameter_count(recipe, ashape)));
  GL_ASSIGN_OR_RETURN(mixers::cuda::GpuHybridMixer hybrid,
                      mixers::cuda::GpuHybridMixer::create(recipe, ashape, inv_freq_host,
                                                           mixer_values.get(), nullptr));
  GL_TRY(hybrid.upload(*cpu_mixer, stream));
  mixers::cuda::HybridScratch hybrid_scratch;
  GL_TRY(hybrid_scratch.reserve(mixers::cuda::HybridScratch::bytes(recipe, ashape, T_max, false)));

  DeviceBuffer<char> workspace;
  size_t ws_bytes = std::max({gated_delta_forward_workspace_bytes(T_max, H, D, false),
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
    rows.push_back({"full attention (ours, wgmma flash)", "prefill fwd ms", T, full, ""});
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
        rows.push_back({full_causal ? "full attention (ours, wgmma flash)" : "sink+window attention",
                        "fwd+bwd ms", T, fb, "deterministic backward; median of 5"});
      }
    }
    GL_ASSIGN_OR_RETURN(double gdn, time_median([&] {
      return gated_delta_chunked_forward(y.get(), nullptr, nullptr, qn.get(), kn.get(), v.get(),
                                         g.get(), beta.get(), T, H, G, D, workspace.get(),
                                         ws_bytes, stream, nullptr, o.value_block, o.gdn);
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
    const mixers::cuda::HybridIO io{T, x.get(), q.get(), k.get(), v.get()};
    GL_ASSIGN_OR_RETURN(double hyb, time_median([&] {
      return hybrid.forward(hybrid_scratch, io, y.get(), nullptr, cublas, stream);
    }, o.warmups, o.repeats, stream));
    rows.push_back({"hybrid (gdn + 8 sinks + 56 window, gate, conv)", "prefill fwd ms", T, hyb,
                    "conv+rope+norm, gate GEMM, gdn, exact branch + mix (fused)"});
    {  // stage breakdown of the hybrid forward: the mixer's stage marks, mean of 5 runs
      mixers::cuda::GpuStageProfile profile;
      profile.enable();
      hybrid_scratch.profile = &profile;
      for (int r = 0; r < 5; ++r) {
        profile.mark("(between runs)", stream);
        GL_TRY(hybrid.forward(hybrid_scratch, io, y.get(), nullptr, cublas, stream));
      }
      profile.mark("(between runs)", stream);
      GL_CUDA_CHECK(cudaStreamSynchronize(stream));
      GL_TRY(profile.collect());
      hybrid_scratch.profile = nullptr;
      for (const auto& [stage, ms] : profile.totals())
        if (stage != "(between runs)")
          rows.push_back({"hybrid stage: " + stage, "prefill fwd ms", T, ms / 5,
                          "events between stages, mean of 5"});
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
    const size_t dws_bytes = attention_decode_workspace_bytes(1, H, G, D, ctx_max);
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
    GL_TRY(cache_mem.allocate(hybrid.cache_bytes()));
    GL_ASSIGN_OR_RETURN(HybridCacheView cache, hybrid.cache_create(cache_mem.get(), stream));

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
        Status st = hybrid.decode_step(y.get(), cache, x.get(), q.get(), k.get(), v.get(), capture);
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
      rows.push_back({"hybrid", "cache bytes/layer", ctx, (double)hybrid.cache_bytes(),
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

}  // namespace golinear::bench::cuda
