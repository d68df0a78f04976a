#include "bench/cuda/transfer_bench.h"

#include <chrono>
#include <memory>
#include <random>

#include "io/config.h"
#include "model/linearization.h"
#include "train/cuda/gpu_attention_transfer.h"

namespace golinear::bench::cuda {

using namespace golinear::train;
using namespace golinear::train::cuda;

Result<Json> gpu_transfer_bench(const TransferBenchOptions& o) {
  if (o.seq_len < 2 || o.batch < 1 || o.steps < 1)
    return make_error("transfer bench: --seq-len ≥ 2, --batch ≥ 1 and --steps ≥ 1 are needed");
  const auto start = std::chrono::steady_clock::now();
  // The teacher's shape and RoPE on the host (no weights), its weights random on the GPU.
  Model shape;
  GL_ASSIGN_OR_RETURN(shape.config, model_config_read(o.config_path));
  shape.inv_freq = rope_inverse_frequencies(shape.config.rope, shape.config.head_dim);
  std::shared_ptr<golinear::model::cuda::GpuModel> gpu;
  {
    GL_ASSIGN_OR_RETURN(auto made, golinear::model::cuda::gpu_model_random(shape.config, o.seed));
    gpu = std::move(made);
  }
  GpuTeacher teacher = gpu_teacher_from_gpu_model(gpu);

  mixers::MixerOptions recipe;  // the default: gdn, gate, conv
  recipe.sinks = o.sinks;
  recipe.window = o.window;
  GL_ASSIGN_OR_RETURN(MixerStack students, linearized_mixers(shape, recipe, {}, o.seed));
  long new_params = 0;
  for (const auto& mixer : students)
    for (mixers::Parameter* p : mixer->parameters()) new_params += (long)p->value.size();

  PackedDataset data;
  data.seq_len = o.seq_len;
  data.tokens.resize((size_t)o.steps * o.batch * o.seq_len);
  std::mt19937_64 rng(o.seed);
  for (int32_t& t : data.tokens) t = (int32_t)(rng() % (uint64_t)shape.config.vocab_size);

  TrainOptions train;
  train.steps = o.steps;
  train.batch = o.batch;
  train.warmup = 1;
  train.profile = o.profile;
  train.pipeline_teacher = o.pipeline_teacher;
  GL_ASSIGN_OR_RETURN(TrainReport report, gpu_attention_transfer(teacher, shape, students, data, train));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const long tokens = o.steps * o.batch * (long)o.seq_len;
  return Json{{"config", o.config_path}, {"seq_len", o.seq_len}, {"batch", o.batch},
              {"steps", o.steps}, {"tokens", tokens}, {"tokens_per_s", report.tokens_per_s},
              {"wall_s", wall}, {"new_params", new_params}, {"final_nmse", report.final_loss},
              {"minutes_per_10m_tokens", report.tokens_per_s > 0 ? 1e7 / report.tokens_per_s / 60 : -1.0}};
}

}  // namespace golinear::bench::cuda
