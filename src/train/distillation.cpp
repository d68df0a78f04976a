#include "train/distillation.h"

#include <cmath>

#include "common/file.h"
#include "model/transformer_backward.h"

namespace golinear::train {

double kl_distillation_loss(const float* teacher_logits, const float* student_logits, int T, int V,
                            float* dlogits) {
  double total = 0.0;
#pragma omp parallel for reduction(+ : total) schedule(static)
  for (int t = 0; t < T; ++t) {
    const float* a = teacher_logits + (long)t * V;
    const float* b = student_logits + (long)t * V;
    double ma = a[0], mb = b[0];
    for (int i = 1; i < V; ++i) {
      ma = std::max(ma, (double)a[i]);
      mb = std::max(mb, (double)b[i]);
    }
    double za = 0, zb = 0;
    for (int i = 0; i < V; ++i) {
      za += std::exp(a[i] - ma);
      zb += std::exp(b[i] - mb);
    }
    const double lza = std::log(za), lzb = std::log(zb);
    double kl = 0;
    for (int i = 0; i < V; ++i) {
      const double log_pa = a[i] - ma - lza, log_pb = b[i] - mb - lzb;
      const double pa = std::exp(log_pa);
      kl += pa * (log_pa - log_pb);
      if (dlogits) dlogits[(long)t * V + i] = (float)((std::exp(log_pb) - pa) / T);
    }
    total += kl;
  }
  return total / T;
}

std::vector<mixers::Parameter*> distillation_parameters(MixerStack& students, LoraAdapters* lora) {
  std::vector<mixers::Parameter*> params = trainable_parameters(students);
  if (lora)
    for (mixers::Parameter* p : lora->parameters()) params.push_back(p);
  return params;
}

double distill_sequence_gradient(Model& model, MixerStack& students, const int32_t* ids, int T,
                                 float scale, LoraAdapters* lora, DistillScratch* scratch) {
  const long n = (long)T * model.config.vocab_size;
  DistillScratch local;
  DistillScratch& s = scratch ? *scratch : local;
  s.teacher_logits.resize(n), s.student_logits.resize(n), s.dlogits.resize(n);  // all overwritten
  std::vector<float>& teacher_logits = s.teacher_logits;
  std::vector<float>& student_logits = s.student_logits;
  std::vector<float>& dlogits = s.dlogits;
  const int V = model.config.vocab_size;
  model_forward(model, ids, T, teacher_logits.data());
  // The student: same backbone, new mixers (and LoRA adapters).
  std::swap(model.mixers, students);
  if (lora) std::swap(model.lora, *lora);
  ForwardTrace trace;
  trace.capture_activations = true;
  model_forward(model, ids, T, student_logits.data(), false, &trace);
  const double loss = kl_distillation_loss(teacher_logits.data(), student_logits.data(), T, V, dlogits.data());
  for (float& g : dlogits) g *= scale;
  model_backward(model, T, trace, dlogits.data());
  if (lora) std::swap(model.lora, *lora);
  std::swap(model.mixers, students);
  return loss;
}

Result<TrainReport> distill_end_to_end(Model& model, MixerStack& students, const PackedDataset& data,
                                       const TrainOptions& options, LoraAdapters* lora) {
  const int T = data.seq_len;
  if (data.size() == 0) return make_error("distillation: no training sequences");
  if (model.lora.enabled()) return make_error("distillation: the teacher model carries LoRA adapters");
  if (lora && !lora->enabled()) lora = nullptr;
  AdamW optimizer(distillation_parameters(students, lora), options.adam);
  TrainLoop loop;
  loop.label = "distill";
  loop.loss_name = "kl";
  loop.tokens_per_step = (long)options.batch * T;
  loop.resume = [&]() -> Result<long> {
    long start = 0;
    if (options.resume && file_exists(options.state_path)) {
      GL_ASSIGN_OR_RETURN(start, train_state_load(options.state_path, students, optimizer, lora));
      if (start > options.steps)
        return make_error(options.state_path, ": resume state is at step ", start, " of a ", options.steps, "-step run");
    }
    return start;
  };
  DistillScratch scratch;  // the logit buffers, allocated by the first sequence
  loop.step = [&](long step, float lr) -> Result<std::vector<StepLoss>> {
    double loss = 0.0;
    for (int b = 0; b < options.batch; ++b) {
      const int32_t* ids = data.sequence((step * options.batch + b) % data.size());
      loss += distill_sequence_gradient(model, students, ids, T, 1.0f / options.batch, lora, &scratch);
    }
    loss /= options.batch;
    StepLoss out{loss, {}};
    apply_nan_fault(students, options, step);
    out.nonfinite_gradient_layer = first_nonfinite_gradient_layer(students, lora);
    if (out.nonfinite_gradient_layer < 0) optimizer.step(lr);
    return std::vector<StepLoss>{out};
  };
  loop.save = [&](long steps_done) -> Status {
    if (options.state_path.empty()) return ok_status();
    return train_state_save(options.state_path, students, optimizer, steps_done, lora);
  };
  GL_ASSIGN_OR_RETURN(std::vector<TrainReport> reports, train_loop_run(options, loop));
  return std::move(reports[0]);
}

}  // namespace golinear::train
