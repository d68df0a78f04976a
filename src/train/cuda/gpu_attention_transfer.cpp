#include "train/cuda/gpu_attention_transfer.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "common/file.h"
#include "common/progress.h"
#include "kernels/cuda/hybrid_train.h"
#include "mixers/cuda/gpu_hybrid_layer.h"
#include "train/cuda/gpu_train_util.h"
#include "mixers/hybrid_mixer.h"

namespace golinear::train::cuda {

namespace kc = kernels::cuda;
using golinear::cuda::GpuLayerTrace;
using kernels::cuda::bf16;
using mixers::cuda::GpuHybridLayer;
using mixers::cuda::GpuHybridScratch;

Result<GpuTeacher> gpu_teacher_from_cpu(const Model& teacher) {
  const int L = teacher.config.num_layers;
  struct Buffers {
    std::vector<kc::DeviceBuffer<bf16>> x, q, k, v, y;
    int T = 0;
  };
  auto buffers = std::make_shared<Buffers>();
  buffers->x.resize(L), buffers->q.resize(L), buffers->k.resize(L), buffers->v.resize(L),
      buffers->y.resize(L);
  const Model* model = &teacher;
  return GpuTeacher([buffers, model, L](const int32_t* tokens, int T,
                                        std::vector<GpuLayerTrace>* layers) -> Status {
    ForwardTrace trace;
    trace.capture_mixer_io = true;
    model_forward(*model, tokens, T, nullptr, false, &trace);
    auto upload = [](kc::DeviceBuffer<bf16>& dst, const std::vector<float>& src) -> Status {
      if (dst.size() != src.size()) GL_TRY(dst.allocate(src.size()));
      std::vector<bf16> host(src.size());
      for (size_t i = 0; i < src.size(); ++i) host[i] = __float2bfloat16(src[i]);
      GL_CUDA_CHECK(cudaMemcpy(dst.get(), host.data(), host.size() * 2, cudaMemcpyHostToDevice));
      return ok_status();
    };
    layers->assign(L, GpuLayerTrace{});
    for (int l = 0; l < L; ++l) {
      const ForwardTrace::Layer& io = trace.layers[l];
      GL_TRY(upload(buffers->x[l], io.x));
      GL_TRY(upload(buffers->q[l], io.q));
      GL_TRY(upload(buffers->k[l], io.k));
      GL_TRY(upload(buffers->v[l], io.v));
      GL_TRY(upload(buffers->y[l], io.y));
      (*layers)[l] = {buffers->x[l].get(), buffers->q[l].get(), buffers->k[l].get(),
                      buffers->v[l].get(), buffers->y[l].get()};
    }
    return ok_status();
  });
}

Result<TrainReport> gpu_attention_transfer(const GpuTeacher& teacher_trace, const Model& teacher,
                                           MixerStack& students, const PackedDataset& data,
                                           const TrainOptions& options) {
  const int L = teacher.config.num_layers, T = data.seq_len;
  if (data.size() == 0) return make_error("attention transfer: no training sequences");
  if ((int)students.size() != L)
    return make_error("attention transfer: ", students.size(), " student mixers for ", L, " layers");
  const mixers::AttentionShape shape = teacher.attention_shape();

  // The trained layers: every hybrid mixer, all of the default recipe.
  std::vector<int> trained;
  mixers::MixerOptions recipe;
  for (int l = 0; l < L; ++l) {
    if (students[l]->kind() == "softmax") continue;
    auto* hybrid = dynamic_cast<mixers::HybridMixer*>(students[l].get());
    if (!hybrid) return make_error("GPU attention transfer: layer ", l, " is not a hybrid mixer");
    if (Status st = mixers::cuda::gpu_hybrid_check_recipe(hybrid->options(), hybrid->shape()); !st.ok())
      return make_error("golinear linearize --device cuda: ", st.error());
    if (!trained.empty() && (hybrid->options().sinks != recipe.sinks ||
                             hybrid->options().window != recipe.window))
      return make_error("GPU attention transfer: every linearized layer must share sinks and window");
    recipe = hybrid->options();
    trained.push_back(l);
  }
  if (trained.empty()) return make_error("attention transfer: every layer is kept full, nothing to train");
  const long per_layer = mixers::cuda::gpu_hybrid_parameter_count(shape);
  const long P = per_layer * (long)trained.size();

  // Device state: parameters, gradients, moments (flat fp32), the layers, one scratch.
  kc::DeviceBuffer<float> value, grad, m, v, norm;
  kc::DeviceBuffer<double> loss_sums;  // (batch, trained, 2)
  kc::DeviceBuffer<char> norm_ws;
  GL_TRY(value.allocate(P));
  GL_TRY(grad.allocate(P));
  GL_TRY(m.allocate(P));
  GL_TRY(v.allocate(P));
  GL_TRY(norm.allocate(1));
  GL_TRY(norm_ws.allocate(kc::grad_norm_workspace_bytes()));
  GL_TRY(loss_sums.allocate((size_t)options.batch * trained.size() * 2));
  GL_CUDA_CHECK(cudaMemset(grad.get(), 0, P * 4));
  GL_CUDA_CHECK(cudaMemset(m.get(), 0, P * 4));
  GL_CUDA_CHECK(cudaMemset(v.get(), 0, P * 4));
  cudaStream_t stream = 0;  // the legacy default stream: ordered with the teacher's work
  CublasHandle cublas;
  GL_TRY(cublas.create());
  std::vector<GpuHybridLayer> layers;
  std::vector<long> block_offset;
  for (size_t i = 0; i < trained.size(); ++i) {
    block_offset.push_back((long)i * per_layer);
    GL_ASSIGN_OR_RETURN(GpuHybridLayer layer,
                        GpuHybridLayer::create(recipe, shape, teacher.inv_freq,
                                               value.get() + i * per_layer, grad.get() + i * per_layer));
    layers.push_back(std::move(layer));
  }
  GpuHybridScratch scratch;
  GL_TRY(scratch.allocate(shape, recipe, T));

  // The CPU optimizer only stores the moments for checkpoints (same format as the CPU trainer).
  AdamW cpu_optimizer(trainable_parameters(students), options.adam);
  GL_ASSIGN_OR_RETURN(std::vector<FlatPiece> pieces, flat_pieces(students, trained, block_offset, "GPU attention transfer"));
  GL_ASSIGN_OR_RETURN(const long start, gpu_train_resume(options, students, cpu_optimizer, pieces, P, m.get(), v.get()));
  long adam_t = cpu_optimizer.steps_taken();
  for (size_t i = 0; i < trained.size(); ++i) GL_TRY(layers[i].upload(*students[trained[i]], stream));

  auto save_state = [&](long step) -> Status {
    for (size_t i = 0; i < trained.size(); ++i) GL_TRY(layers[i].download(*students[trained[i]], stream));
    return gpu_train_save(options, students, cpu_optimizer, pieces, P, m.get(), v.get(), adam_t, step);
  };

  TrainReport report;
  report.steps_done = start;
  report.layer_nmse.assign(L, -1.0);
  std::vector<double> layer_sum(L, 0.0);
  long tail_steps = 0;
  const long tail_from = options.steps - std::max(1L, options.steps / 10);
  ProgressBar bar("transfer (cuda)", options.steps);
  const auto t0 = std::chrono::steady_clock::now();
  long tokens_this_run = 0;
  const long n_out = (long)T * shape.H * shape.D;
  // loss = mean over layers and over the batch of each layer's NMSE.
  const float scale = 1.0f / (float)(trained.size() * options.batch);
  std::vector<GpuLayerTrace> traces;
  std::vector<double> sums((size_t)options.batch * trained.size() * 2);
  for (long step = start; step < options.steps; ++step) {
    for (int b = 0; b < options.batch; ++b) {
      const long index = (step * options.batch + b) % data.size();
      GL_TRY(teacher_trace(data.sequence(index), T, &traces));
      if ((int)traces.size() != L) return make_error("GPU attention transfer: the teacher traced ", traces.size(), " layers");
      GL_CUDA_CHECK(cudaDeviceSynchronize());  // the teacher may have used its own stream
      for (size_t i = 0; i < trained.size(); ++i) {
        const GpuLayerTrace& io = traces[trained[i]];
        GL_TRY(layers[i].forward(scratch, io.x, io.q, io.k, io.v, cublas.get(), stream));
        GL_TRY(kc::nmse_loss_forward_backward(loss_sums.get() + ((size_t)b * trained.size() + i) * 2,
                                              scratch.dy, scratch.y, io.y, n_out, scale,
                                              scratch.nmse_ws, scratch.nmse_bytes, stream));
        GL_TRY(layers[i].backward(scratch, io.x, io.q, io.k, io.v, cublas.get(), stream));
      }
      tokens_this_run += T;
    }
    const float lr = learning_rate_at(step, options.steps, options.warmup, options.lr);
    GL_TRY(kc::grad_norm(norm.get(), grad.get(), P, norm_ws.get(), norm_ws.size(), stream));
    kc::AdamWStep adam{lr, options.adam.beta1, options.adam.beta2, options.adam.eps,
                       options.adam.weight_decay, options.adam.clip_norm, ++adam_t};
    GL_TRY(kc::adamw_step(value.get(), grad.get(), m.get(), v.get(), P, norm.get(), adam, stream));
    for (GpuHybridLayer& layer : layers) GL_TRY(layer.refresh_gates(stream));
    GL_CUDA_CHECK(cudaMemcpyAsync(sums.data(), loss_sums.get(), sums.size() * sizeof(double),
                                  cudaMemcpyDeviceToHost, stream));
    GL_CUDA_CHECK(cudaStreamSynchronize(stream));

    std::vector<double> step_nmse(L, 0.0);
    for (int b = 0; b < options.batch; ++b)
      for (size_t i = 0; i < trained.size(); ++i) {
        const double* s = &sums[((size_t)b * trained.size() + i) * 2];
        step_nmse[trained[i]] += s[0] / std::max(s[1], 1e-12);
      }
    double loss = 0.0;
    for (int l : trained) loss += step_nmse[l] / options.batch;
    loss /= trained.size();
    if (!std::isfinite(loss))
      return make_error("GPU attention transfer: the loss became ", loss, " at step ", step + 1);
    const bool tail = step >= tail_from;
    tail_steps += tail;
    report.loss_curve.push_back(loss);
    report.steps_done = step + 1;
    if (tail) {
      report.final_loss += loss;
      for (int l : trained) layer_sum[l] += step_nmse[l] / options.batch;
    }
    bar.update(step + 1, (double)tokens_this_run,
               str_cat("nmse ", std::to_string(loss).substr(0, 6), " · lr ", lr));
    const StepEnd end = step_end(options, step, start);
    if (end.checkpoint && !options.state_path.empty()) GL_TRY(save_state(step + 1));
    if (end.stop) break;
  }
  GL_CUDA_CHECK(cudaDeviceSynchronize());
  bar.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  report.tokens_per_s = seconds > 0 ? tokens_this_run / seconds : 0;
  if (tail_steps > 0) {
    report.final_loss /= tail_steps;
    for (int l : trained) report.layer_nmse[l] = layer_sum[l] / tail_steps;
  }
  // The trained parameters back into the CPU mixers (what the caller saves).
  for (size_t i = 0; i < trained.size(); ++i) GL_TRY(layers[i].download(*students[trained[i]], stream));
  return report;
}

}  // namespace golinear::train::cuda

namespace golinear::train::cuda {

Result<GpuTeacher> gpu_teacher_from_model(const Model& teacher) {
  GL_ASSIGN_OR_RETURN(std::unique_ptr<golinear::cuda::GpuModel> uploaded,
                      golinear::cuda::gpu_model_upload(teacher));
  std::shared_ptr<golinear::cuda::GpuModel> model = std::move(uploaded);
  return GpuTeacher([model](const int32_t* tokens, int T, std::vector<GpuLayerTrace>* layers) {
    return golinear::cuda::gpu_model_trace(*model, tokens, T, layers);
  });
}

}  // namespace golinear::train::cuda
