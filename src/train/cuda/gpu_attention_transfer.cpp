#include "train/cuda/gpu_attention_transfer.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/file.h"
#include "common/progress.h"
#include "mixers/cuda/hybrid_mixer.h"
#include "train/cuda/gpu_train_util.h"
#include "mixers/hybrid_mixer.h"

namespace golinear::train::cuda {

namespace kc = kernels::cuda;
using golinear::model::cuda::GpuLayerTrace;
using kernels::cuda::bf16;
using mixers::cuda::GpuHybridMixer;
using mixers::cuda::HybridIO;
using mixers::cuda::HybridScratch;
using mixers::cuda::GpuStageProfile;

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

  // The trained layers: every hybrid mixer, all of one recipe (but for per-layer budgets).
  GL_ASSIGN_OR_RETURN(const GpuTrainedLayers selected, gpu_trained_layers(students, "GPU attention transfer"));
  const std::vector<int>& trained = selected.layers;
  const mixers::MixerOptions& recipe = selected.recipe;
  const long per_layer = mixers::cuda::hybrid_parameter_count(recipe, shape);
  const long P = per_layer * (long)trained.size();

  // Device state: parameters, gradients, moments (flat fp32), the layers, one scratch.
  kc::DeviceBuffer<float> value, grad;
  kc::DeviceBuffer<double> loss_sums;  // (batch, trained, 2)
  GpuAdamW adamw;
  GL_TRY(value.allocate(P));
  GL_TRY(grad.allocate(P));
  GL_TRY(adamw.allocate(P));
  GL_TRY(loss_sums.allocate((size_t)options.batch * trained.size() * 2));
  GL_CUDA_CHECK(cudaMemset(grad.get(), 0, P * 4));
  // With a teacher that can trace ahead (gpu_teacher_from_model) the teacher is pipelined: the
  // students train on a stream of their own at the highest priority (their many small kernels
  // take SMs as the teacher's GEMM tiles free them) while the teacher of the next sequence runs
  // on its stream, into the other of two trace slots. Same kernels, same order of every sum:
  // the loss curve equals the synchronous run's bit for bit (tests/train/cuda). Measured on the
  // 8B shape (H200): 21.4K vs 19.7K tokens/s. options.pipeline_teacher = false turns it off:
  // the students then run on the legacy default stream after each synchronous trace.
  const bool pipelined = (bool)teacher_trace.async() && options.pipeline_teacher;
  CudaStream student_stream;
  CudaEvent teacher_done[2], students_done[2];
  if (pipelined) {
    GL_TRY(student_stream.create(true));
    for (int i = 0; i < 2; ++i) {
      GL_TRY(teacher_done[i].create());
      GL_TRY(students_done[i].create());
    }
  }
  cudaStream_t stream = pipelined ? student_stream.get() : 0;
  CublasHandle cublas;
  GL_TRY(cublas.create());
  std::vector<GpuHybridMixer> layers;
  for (size_t i = 0; i < trained.size(); ++i) {
    GL_ASSIGN_OR_RETURN(GpuHybridMixer layer,
                        GpuHybridMixer::create(selected.options[i], shape, teacher.inv_freq,
                                               value.get() + i * per_layer, grad.get() + i * per_layer));
    layers.push_back(std::move(layer));
  }
  HybridScratch scratch;
  GL_TRY(scratch.reserve(selected.scratch_bytes(shape, T)));
  // options.profile: CUDA events between the stages, a table on stderr at the end.
  GpuStageProfile profile;
  if (options.profile) profile.enable();
  scratch.profile = profile.enabled() ? &profile : nullptr;

  // The CPU optimizer only stores the moments for checkpoints (same format as the CPU trainer).
  AdamW cpu_optimizer(trainable_parameters(students), options.adam);
  GL_ASSIGN_OR_RETURN(std::vector<FlatPiece> pieces, flat_pieces(students, trained, per_layer, "GPU attention transfer"));
  long start = 0, adam_t = 0;

  auto save_state = [&](long step) -> Status {
    for (size_t i = 0; i < trained.size(); ++i) GL_TRY(layers[i].download(*students[trained[i]], stream));
    return gpu_train_save(options, students, cpu_optimizer, pieces, P, adamw.m(), adamw.v(), adam_t, step);
  };

  // loss = mean over layers and over the batch of each layer's NMSE.
  const float scale = 1.0f / (float)(trained.size() * options.batch);
  std::vector<GpuLayerTrace> traces, slot_traces[2];
  std::vector<double> sums((size_t)options.batch * trained.size() * 2);
  // Sequence seq of this run (0, 1, …) is step start + seq / batch, batch row seq % batch.
  auto sequence_tokens = [&](long seq) {
    const long step = start + seq / options.batch, b = seq % options.batch;
    return data.sequence((step * options.batch + b) % data.size());
  };
  // The teacher of sequence seq into slot seq % 2, once the students of seq − 2 (the slot's
  // previous reader) are done.
  auto enqueue_teacher = [&](long seq) -> Status {
    const int slot = (int)(seq % 2);
    return teacher_trace.async()(sequence_tokens(seq), T, slot,
                                 seq >= 2 ? students_done[slot].get() : nullptr,
                                 teacher_done[slot].get(), &slot_traces[slot]);
  };

  TrainLoop loop;
  loop.label = "transfer (cuda)";
  loop.loss_name = "nmse";
  loop.tokens_per_step = (long)options.batch * T;
  loop.trained_layers = {trained};
  loop.num_layers = L;
  loop.resume = [&]() -> Result<long> {
    GL_ASSIGN_OR_RETURN(start, gpu_train_resume(options, students, cpu_optimizer, pieces, P, adamw.m(), adamw.v()));
    adam_t = cpu_optimizer.steps_taken();
    for (size_t i = 0; i < trained.size(); ++i) GL_TRY(layers[i].upload(*students[trained[i]], stream));
    // The setup's memsets ran on the legacy stream, which a non-blocking students' stream does
    // not wait for.
    GL_CUDA_CHECK(cudaDeviceSynchronize());
    return start;
  };
  loop.step = [&](long step, float lr) -> Result<std::vector<StepLoss>> {
    const long total_sequences = std::max(0L, options.steps - start) * options.batch;
    if (pipelined && step == start && total_sequences > 0) GL_TRY(enqueue_teacher(0));
    for (int b = 0; b < options.batch; ++b) {
      const long seq = (step - start) * options.batch + b;
      const std::vector<GpuLayerTrace>* io_traces = &traces;
      if (pipelined) {
        if (seq + 1 < total_sequences) GL_TRY(enqueue_teacher(seq + 1));
        GL_CUDA_CHECK(cudaStreamWaitEvent(stream, teacher_done[seq % 2].get(), 0));
        profile.mark("teacher trace: exposed wait (pipelined)", stream);
        io_traces = &slot_traces[seq % 2];
      } else {
        // The teacher overwrites the one trace the students of the previous sequence read, on
        // a stream of its own that does not wait for theirs: let them finish first (a race with
        // batch > 1 until session 3, which made runs differ from one another).
        GL_CUDA_CHECK(cudaStreamSynchronize(stream));
        profile.mark("host: before the teacher", stream);
        GL_TRY(teacher_trace(sequence_tokens(seq), T, &traces));
        GL_CUDA_CHECK(cudaDeviceSynchronize());  // the teacher may have used its own stream
        profile.mark("teacher trace (gpu_model_trace, all layers)", stream);
      }
      if ((int)io_traces->size() != L)
        return make_error("GPU attention transfer: the teacher traced ", io_traces->size(), " layers");
      for (size_t i = 0; i < trained.size(); ++i) {
        const GpuLayerTrace& io = (*io_traces)[trained[i]];
        double* layer_sums = loss_sums.get() + ((size_t)b * trained.size() + i) * 2;
        // The mixing fused with the loss: no y or dy buffer (mixers/cuda/hybrid_mixer.h).
        const HybridIO in{T, io.x, io.q, io.k, io.v};
        GL_TRY(layers[i].forward_train(scratch, in, nullptr, cublas.get(), stream));
        GL_TRY(layers[i].loss_nmse(scratch, in, layer_sums, io.y, stream));
        GL_TRY(layers[i].backward_nmse(scratch, in, layer_sums, scale, io.y, cublas.get(), stream));
      }
      if (pipelined) GL_CUDA_CHECK(cudaEventRecord(students_done[seq % 2].get(), stream));
    }
    GL_TRY(gpu_apply_nan_fault(options, step, students, pieces, grad.get(), stream));
    GL_TRY(adamw.step(value.get(), grad.get(), lr, options.adam, ++adam_t, layers, stream));
    profile.mark("optimizer (norm, AdamW, bf16 gates)", stream);
    GL_CUDA_CHECK(cudaMemcpyAsync(sums.data(), loss_sums.get(), sums.size() * sizeof(double),
                                  cudaMemcpyDeviceToHost, stream));
    profile.mark("loss readback (one per step)", stream);
    GL_ASSIGN_OR_RETURN(const float norm, adamw.norm(stream));  // waits for the step
    GL_TRY(profile.collect());

    std::vector<double> step_nmse(L, 0.0);
    for (int b = 0; b < options.batch; ++b)
      for (size_t i = 0; i < trained.size(); ++i) {
        const double* s = &sums[((size_t)b * trained.size() + i) * 2];
        step_nmse[trained[i]] += s[0] / std::max(s[1], 1e-12);
      }
    StepLoss out;
    out.layer_loss.assign(L, 0.0);
    double loss = 0.0;
    for (int l : trained) {
      out.layer_loss[l] = step_nmse[l] / options.batch;
      loss += step_nmse[l] / options.batch;
    }
    loss /= trained.size();
    out.loss = loss;
    if (!std::isfinite(norm)) {  // no update was made; the loop stops naming the layer
      GL_ASSIGN_OR_RETURN(out.nonfinite_gradient_layer,
                          gpu_nonfinite_gradient_layer(layers, trained, students, nullptr, nullptr, stream));
    }
    return std::vector<StepLoss>{std::move(out)};
  };
  loop.save = [&](long steps_done) -> Status {
    if (options.state_path.empty()) return ok_status();
    return save_state(steps_done);
  };
  loop.finish = [&]() -> Status {
    GL_CUDA_CHECK(cudaDeviceSynchronize());
    return ok_status();
  };
  GL_ASSIGN_OR_RETURN(std::vector<TrainReport> reports, train_loop_run(options, loop));
  TrainReport& report = reports[0];
  if (profile.enabled()) {
    const long tokens_this_run = (report.steps_done - start) * options.batch * (long)T;
    const double seconds = report.seconds;
    const long sequences = std::max(1L, tokens_this_run / T);
    std::fprintf(stderr, "%s  (%ld sequences of %d tokens, %zu trained layers, %.0f tokens/s, %.1f ms wall per sequence)\n",
                 profile.report(pipelined ? "attention transfer (cuda), time per stage on the students' stream "
                                            "(teacher pipelined on its own stream)"
                                          : "attention transfer (cuda), GPU time per stage",
                                sequences, "seq").c_str(),
                 sequences, T, trained.size(), report.tokens_per_s, 1e3 * seconds / sequences);
  }
  // The trained parameters back into the CPU mixers (what the caller saves).
  for (size_t i = 0; i < trained.size(); ++i) GL_TRY(layers[i].download(*students[trained[i]], stream));
  return std::move(report);
}

}  // namespace golinear::train::cuda

namespace golinear::train::cuda {

GpuTeacher gpu_teacher_from_gpu_model(std::shared_ptr<golinear::model::cuda::GpuModel> model) {
  return GpuTeacher(
      [model](const int32_t* tokens, int T, std::vector<GpuLayerTrace>* layers) {
        return golinear::model::cuda::gpu_model_trace(*model, tokens, T, layers);
      },
      [model](const int32_t* tokens, int T, int slot, cudaEvent_t wait, cudaEvent_t done,
              std::vector<GpuLayerTrace>* layers) {
        return golinear::model::cuda::gpu_model_trace_async(*model, tokens, T, slot, wait, done, layers);
      });
}

Result<GpuTeacher> gpu_teacher_from_model(const Model& teacher) {
  GL_ASSIGN_OR_RETURN(std::unique_ptr<golinear::model::cuda::GpuModel> uploaded,
                      golinear::model::cuda::gpu_model_upload(teacher));
  return gpu_teacher_from_gpu_model(std::move(uploaded));
}

}  // namespace golinear::train::cuda
